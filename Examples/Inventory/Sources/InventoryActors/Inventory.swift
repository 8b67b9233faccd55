import Foundation
import Oscar

/// The stock of one node, at `/user/inventory`: SKU to count. Logs a
/// one-line summary every `reportEvery` while the stock changes.
public final class Inventory: Reactor {
    /// The most one request may add or remove: keeps every sum far from
    /// `Int`'s range, so no input can make the actor trap.
    public static let maxMove = 1_000_000
    /// How often the stock is reported (only when it changed since the last
    /// report).
    public static let reportEvery: Duration = .seconds(30)

    /// Photos kept at most: each can be as large as a message, so the
    /// actor bounds how many it keeps, not only how large each is.
    public static let maxPhotos = 16

    private var stock: [String: Int] = [:]
    private var photos: [String: Data] = [:]
    private var changedSinceReport = false

    public init() {}

    /// A fixed-delay timer: the next report comes `reportEvery` after the
    /// last one was written, on this actor's loop, and ends with the actor.
    public func started(_ context: ActorContext) {
        context.timers.startWithFixedDelay("report", sending: ReportStock(), delay: Self.reportEvery)
    }

    public static func reactions(_ r: inout Reactions<Inventory>) {
        r.on(
            AddStock.self,
            do: { me, m in
                try check(m.count)
                me.stock[m.sku, default: 0] += m.count
                me.changedSinceReport = true
            })
        r.on(GetStock.self, result: { me, m in me.stock[m.sku] ?? 0 })
        r.on(
            RemoveStock.self,
            result: { me, m in
                try check(m.count)
                let available = me.stock[m.sku] ?? 0
                guard available >= m.count else { return .outOfStock(available: available) }
                me.stock[m.sku] = available - m.count
                me.changedSinceReport = true
                return .removed(remaining: available - m.count)
            })
        r.on(
            PutPhoto.self,
            do: { me, m in
                guard me.photos[m.sku] != nil || me.photos.count < maxPhotos else {
                    throw InventoryError.tooManyPhotos(maxPhotos)
                }
                me.photos[m.sku] = m.photo
            })
        r.on(GetPhoto.self, result: { me, m in me.photos[m.sku] })
        r.on(ReportStock.self, do: { me, _ in me.report() })
    }

    private func report() {
        guard changedSinceReport else { return }
        changedSinceReport = false
        let counts = stock.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        OscarLog.shared.info("inventory: \(counts.isEmpty ? "empty" : counts.joined(separator: ", "))")
    }

    private static func check(_ count: Int) throws(InventoryError) {
        guard count >= 0 else { throw .negativeCount(count) }
        guard count <= maxMove else { throw .tooMany(count) }
    }
}

/// A routee of the `pricing` pool, which spans the cluster: any node's
/// `/user/pricing` sends each quote to a routee on some member.
public final class Pricer: Reactor {
    private var node = ""
    public init() {}

    public func started(_ context: ActorContext) { node = context.node.description }

    public static func reactions(_ r: inout Reactions<Pricer>) {
        r.on(
            Quote.self,
            result: { me, m in
                guard (0...Inventory.maxMove).contains(m.count) else { throw InventoryError.tooMany(m.count) }
                // 125 cents a unit, whatever the SKU: the point is where it runs.
                return QuoteReply(total: m.count * 125, pricedBy: me.node)
            })
    }
}

/// The cluster-wide ledger at `/user/ledger`: one instance in the cluster
/// (a cluster singleton), on the oldest member, moved when it leaves.
public final class Ledger: Reactor {
    public struct Totals: Codable, Sendable, Equatable {
        public var movements = 0
        public var net: [String: Int] = [:]
    }

    private var totals = Totals()
    public init() {}

    public static func reactions(_ r: inout Reactions<Ledger>) {
        r.on(
            Record.self,
            do: { me, m in
                guard abs(m.delta) <= Inventory.maxMove else { throw InventoryError.tooMany(m.delta) }
                me.totals.movements += 1
                me.totals.net[m.sku, default: 0] += m.delta
            })
        r.on(GetLedger.self, result: { me, _ in me.totals })
    }
}
