import OscarCBOR
import OscarCluster
import OscarRuntime
import Synchronization

/// Mangled type names, both ways, cached: the runtime's mangler and
/// demangler cost microseconds, and a call names its generic
/// substitutions, return and error types every time. Only types that exist
/// are cached, so names from the network cannot grow the cache.
enum TypeNames {
    private static let names = Mutex<[ObjectIdentifier: String]>([:])
    private static let types = Mutex<[String: TypeBox]>([:])

    /// A metatype, as a value the cache can hold.
    private struct TypeBox: @unchecked Sendable { let type: Any.Type }

    package static func name(of type: Any.Type) -> String? {
        let key = ObjectIdentifier(type)
        if let known = names.withLock({ $0[key] }) { return known }
        guard let name = _mangledTypeName(type) else { return nil }
        names.withLock { $0[key] = name }
        return name
    }

    package static func type(named name: String) -> Any.Type? {
        if let known = types.withLock({ $0[name] }) { return known.type }
        guard let type = _typeByName(name) else { return nil }
        types.withLock { $0[name] = TypeBox(type: type) }
        return type
    }
}
