/// Carries a value across a concurrency boundary the compiler cannot see is safe.
///
/// Used only where an invariant documented at the use site makes it safe, such
/// as "this actor instance is touched only on its loop thread".
package struct UncheckedSendable<Value>: @unchecked Sendable {
    package var value: Value
    package init(_ value: Value) { self.value = value }
}
