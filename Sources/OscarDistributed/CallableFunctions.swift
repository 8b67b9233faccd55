import Glibc
import OscarBase
import OscarCBOR
import OscarCluster
import OscarMembership
import OscarRemote
import OscarRuntime
import SwiftShims

/// The distributed functions this program can execute, read once from the
/// runtime's table of accessible functions, so that a call can name its
/// target by function name (`oscar ask URI .greet '["Ada"]'`) rather than by
/// mangled symbol.
///
/// Deviation from "unsafe pointers only in EventLoop/ and Transport/": the
/// table is a metadata section of each loaded image, read here with the
/// runtime's own enumeration (`swift_enumerateAllMetadataSections`) and
/// demangler. It is read-only, once, and confined to this file.
enum CallableFunctions {
    struct Function: Sendable {
        /// The mangled identifier a `RemoteCallTarget` carries.
        var identifier: String
        /// `Module.Type`
        package var type: String
        /// The base name, such as `greet`.
        package var name: String
        /// The demangled signature, such as `greet(Swift.String) async throws -> Swift.String`.
        package var signature: String
        var isGeneric: Bool
    }

    /// Every distributed function of every loaded image.
    package static let all: [Function] = read()

    /// `all`, by identifier.
    private static let byIdentifier: [String: Function] = Dictionary(
        all.map { ($0.identifier, $0) }, uniquingKeysWith: { first, _ in first })

    /// The function a call's mangled identifier names, if this program has it.
    package static func function(identifier: String) -> Function? { byIdentifier[identifier] }

    /// The identifier of the distributed function `name` of `type` (a base
    /// name, or a signature prefix such as `add(Swift.Int` to pick an
    /// overload), or an error that lists what there is.
    static func identifier(of name: String, on type: Any.Type) throws(AskError) -> String {
        let typeName = String(reflecting: type)
        let functions = all.filter { $0.type == typeName }
        let matching = functions.filter { name.contains("(") ? $0.signature.hasPrefix(name) : $0.name == name }
        guard let only = matching.first, matching.count == 1 else {
            let known = functions.map(\.signature).sorted().joined(separator: "; ")
            throw .handlerFailed(
                matching.isEmpty
                    ? "\(typeName) has no distributed func \(name); it has: \(known.isEmpty ? "none" : known)"
                    : "\(name) is overloaded on \(typeName): \(matching.map(\.signature).joined(separator: "; ")); name one by its signature"
            )
        }
        guard !only.isGeneric else {
            throw .handlerFailed("\(only.signature) is generic: it cannot be called by name")
        }
        return only.identifier
    }

    /// `Type.name(Args) -> R` for an identifier, for messages a person reads.
    package static func signature(of identifier: String) -> String {
        function(identifier: identifier).map { "\($0.type).\($0.signature)" } ?? identifier
    }

    private static func read() -> [Function] {
        let names = CollectedNames()
        enumerateSections(collectNames, Unmanaged.passUnretained(names).toOpaque())
        return withExtendedLifetime(names) { names.all.compactMap(describe) }
    }

    /// `distributed thunk Module.Type.name(Args) async throws -> R` → a Function.
    private static func describe(_ identifier: String) -> Function? {
        guard let text = identifier.withCString({ demangle($0, strlen($0), nil, nil, 0) }) else { return nil }
        defer { free(text) }
        let full = String(cString: text)
        let prefix = "distributed thunk "
        guard full.hasPrefix(prefix) else { return nil }
        let body = full.dropFirst(prefix.count)
        guard let paren = body.firstIndex(of: "(") else { return nil }
        var qualified = String(body[..<paren])
        let isGeneric = qualified.hasSuffix(">")
        if isGeneric, let angle = qualified.firstIndex(of: "<") { qualified = String(qualified[..<angle]) }
        guard let dot = qualified.lastIndex(of: ".") else { return nil }
        let name = String(qualified[qualified.index(after: dot)...])
        return Function(
            identifier: identifier, type: String(qualified[..<dot]), name: name,
            signature: name + body[paren...], isGeneric: isGeneric)
    }
}

@_silgen_name("swift_enumerateAllMetadataSections")
private func enumerateSections(
    _ body: @convention(c) (UnsafePointer<MetadataSections>, UnsafeMutableRawPointer) -> Bool,
    _ context: UnsafeMutableRawPointer)

@_silgen_name("swift_demangle")
private func demangle(
    _ mangled: UnsafePointer<CChar>?, _ length: Int, _ output: UnsafeMutablePointer<CChar>?,
    _ outputSize: UnsafeMutablePointer<Int>?, _ flags: UInt32
) -> UnsafeMutablePointer<CChar>?

/// Collects the names while the runtime enumerates the images.
private final class CollectedNames {
    var all: [String] = []
}

/// Accessible-function records: five 32-bit fields, the first a relative
/// pointer to the mangled name (version 5 of the sections).
private let recordSize = 20

/// Called by the runtime for each loaded image.
private func collectNames(_ sections: UnsafePointer<MetadataSections>, _ context: UnsafeMutableRawPointer) -> Bool {
    let names = Unmanaged<CollectedNames>.fromOpaque(context).takeUnretainedValue()
    guard sections.pointee.version >= 5 else { return true }
    let range = sections.pointee.swift5_accessible_functions
    guard range.length > 0, let start = UnsafeRawPointer(bitPattern: range.start) else { return true }
    var offset = 0
    while offset + recordSize <= range.length {
        let record = start + offset
        let name = record + Int(record.loadUnaligned(as: Int32.self))
        names.all.append(String(cString: name.assumingMemoryBound(to: CChar.self)))
        offset += recordSize
    }
    return true
}
