import OscarBase
import OscarCBOR
import OscarMembership
import OscarRemote
import OscarRuntime

/// A consistent-hash ring: keys map to members so that the mapping stays put
/// while the members do, and only about 1/N of keys move when a member joins
/// a ring of N.
///
/// Each member stands at `pointsPerMember` places on a 64-bit circle, and a
/// key belongs to the first member at or after the key's place. The hash is
/// FNV-1a with a final mix, fixed for all processes and runs: Swift's own
/// `Hasher` is seeded per process, and two nodes must agree.
package struct HashRing<Member: Hashable & Sendable>: Sendable {
    private var points: [(place: UInt64, member: Member)] = []

    static var pointsPerMember: Int { 128 }

    /// `members` with the name each is hashed by (stable across nodes).
    package init(_ members: [(member: Member, name: String)]) {
        for (member, name) in members {
            for i in 0..<Self.pointsPerMember { points.append((Self.hash("\(name)#\(i)"), member)) }
        }
        points.sort { $0.place < $1.place }
    }

    package var isEmpty: Bool { points.isEmpty }

    package func member(for key: some Sequence<UInt8>) -> Member? {
        guard !points.isEmpty else { return nil }
        let place = Self.hash(bytes: key)
        var low = 0
        var high = points.count
        while low < high {
            let mid = (low + high) / 2
            if points[mid].place < place { low = mid + 1 } else { high = mid }
        }
        return points[low == points.count ? 0 : low].member
    }

    package static func hash(_ text: String) -> UInt64 { hash(bytes: text.utf8) }

    package static func hash(bytes: some Sequence<UInt8>) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        // FNV alone clusters similar keys; a SplitMix64 finaliser spreads them.
        h = (h ^ (h >> 30)) &* 0xbf58_476d_1ce4_e5b9
        h = (h ^ (h >> 27)) &* 0x94d0_49bb_1331_11eb
        return h ^ (h >> 31)
    }
}
