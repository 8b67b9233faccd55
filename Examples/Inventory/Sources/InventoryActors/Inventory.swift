import Oscar

/// The stock of one node, at `/user/inventory`: SKU to count.
public final class Inventory: Reactor {
    /// The most one request may add or remove: keeps every sum far from
    /// `Int`'s range, so no input can make the actor trap.
    public static let maxMove = 1_000_000

    private var stock: [String: Int] = [:]

    public init() {}

    public static func reactions(_ r: inout Reactions<Inventory>) {
        r.on(
            AddStock.self,
            do: { me, m in
                try check(m.count)
                me.stock[m.sku, default: 0] += m.count
            })
        r.on(GetStock.self, result: { me, m in me.stock[m.sku] ?? 0 })
        r.on(
            RemoveStock.self,
            result: { me, m in
                try check(m.count)
                let available = me.stock[m.sku] ?? 0
                guard available >= m.count else { return .outOfStock(available: available) }
                me.stock[m.sku] = available - m.count
                return .removed(remaining: available - m.count)
            })
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
