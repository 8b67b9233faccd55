import Oscar
import Testing

@testable import OscarMembership

/// `MemberFlags` against plain arrays of `Bool`, which the gossip state kept
/// before: the same answers for random flags of every length around the
/// 64-bit word edges.
@Suite(.timeLimit(.minutes(1))) struct MemberFlagsTests {
    @Test func bitsAnswerAsArraysOfBoolsDo() {
        var random = SplitMix64(seed: 64)
        for round in 0..<400 {
            let count = round < 200 ? round % 131 : Int(random.next() % 2_000)
            let density = random.next() % 5  // from none set to most set
            let a = (0..<count).map { _ in random.next() % 4 < density }
            let b = (0..<count).map { _ in random.next() % 3 == 0 }
            let c = (0..<count).map { _ in random.next() % 2 == 0 }
            let fa = MemberFlags(count: count) { a[$0] }
            let fb = MemberFlags(count: count) { b[$0] }
            let fc = MemberFlags(count: count) { c[$0] }
            #expect((0..<count).allSatisfy { fa[$0] == a[$0] }, "count \(count)")
            #expect(fa.setCount == a.count(where: { $0 }))
            let setIndices = a.indices.filter { a[$0] }
            #expect(fa.setIndices == setIndices)
            #expect((0...setIndices.count).map(fa.indexOfSet) == setIndices.map(Optional.some) + [nil])
            let minus = fa.subtracting(fb, fc)
            #expect((0..<count).allSatisfy { minus[$0] == (a[$0] && !b[$0] && !c[$0]) })
            #expect(minus.setCount == (0..<count).count { a[$0] && !b[$0] && !c[$0] })
            var union = fa
            union.formUnion(fb)
            #expect((0..<count).allSatisfy { union[$0] == (a[$0] || b[$0]) })
            #expect(MemberFlags.cover(count, fa, fb, fc) == (0..<count).allSatisfy { a[$0] || b[$0] || c[$0] })
            let all = MemberFlags.all(count: count)
            #expect(all.setCount == count && MemberFlags.cover(count, all))
            #expect(all.subtracting(fa).setCount == count - fa.setCount)
            var cleared = fa
            for i in setIndices { cleared[i] = false }
            #expect(cleared == MemberFlags(count: count), "clearing every set flag leaves none")
        }
    }
}
