import Foundation
import Oscar

// Each message names the actor that handles it (`Receiver`), so a typed ref
// (`ref.typed(as: Inventory.self)`) takes only that actor's messages: a
// compile error, not an `unhandled` error at run time.

/// Puts `count` more of `sku` in stock. A tell: no reply.
public struct AddStock: Message {
    public typealias Receiver = Inventory
    public var sku: String
    public var count: Int
    public init(sku: String, count: Int) {
        self.sku = sku
        self.count = count
    }
}

/// How many of `sku` are in stock.
public struct GetStock: Message {
    public typealias Receiver = Inventory
    public typealias Reply = Int
    public var sku: String
    public init(sku: String) { self.sku = sku }
}

/// Takes `count` of `sku` out of stock, all or nothing: the reply says how
/// many are left, or that there were too few (and nothing was taken).
public struct RemoveStock: Message {
    public typealias Receiver = Inventory
    public typealias Reply = Removal
    public var sku: String
    public var count: Int
    public init(sku: String, count: Int) {
        self.sku = sku
        self.count = count
    }
}

/// What a `RemoveStock` did. A typed outcome in the reply, so a caller on
/// any node (or the CLI, as JSON) tells "too few" from a failed ask.
public enum Removal: Codable, Sendable, Equatable {
    case removed(remaining: Int)
    case outOfStock(available: Int)
}

/// Keeps a photo of `sku`, replacing the one before. A large message: one
/// over 64 KiB travels in chunks between the small ones, up to the nodes'
/// maximum message size (64 MiB by default). A tell.
public struct PutPhoto: Message {
    public typealias Receiver = Inventory
    public var sku: String
    public var photo: Data
    public init(sku: String, photo: Data) {
        self.sku = sku
        self.photo = photo
    }
}

/// The photo of `sku`, or nil when it has none.
public struct GetPhoto: Message {
    public typealias Receiver = Inventory
    public typealias Reply = Data?
    public var sku: String
    public init(sku: String) { self.sku = sku }
}

/// A price for `count` of `sku`, from the `pricing` pool.
public struct Quote: Message {
    public typealias Receiver = Pricer
    public typealias Reply = QuoteReply
    public var sku: String
    public var count: Int
    public init(sku: String, count: Int) {
        self.sku = sku
        self.count = count
    }
}

public struct QuoteReply: Codable, Sendable, Equatable {
    /// In cents.
    public var total: Int
    /// The node whose routee priced it.
    public var pricedBy: String
}

/// Counts one stock movement in the cluster-wide ledger (the singleton).
public struct Record: Message {
    public typealias Receiver = Ledger
    public var sku: String
    public var delta: Int
    public init(sku: String, delta: Int) {
        self.sku = sku
        self.delta = delta
    }
}

/// The ledger's totals: movements seen and the net change per SKU.
public struct GetLedger: Message {
    public typealias Receiver = Ledger
    public typealias Reply = Ledger.Totals
    public init() {}
}

/// The inventory's own timer message: time to report the stock (see
/// `Inventory.reportEvery`). Not part of what other actors send.
struct ReportStock: Message {
    typealias Receiver = Inventory
}

/// Why a request was refused. Arguments come from whoever sends them (the
/// CLI, another node), so a bad one is a thrown error, never a trap.
public enum InventoryError: Error, Codable, Sendable, Equatable, CustomStringConvertible {
    case negativeCount(Int)
    case tooMany(Int)
    /// A photo for a new SKU when this many are kept already.
    case tooManyPhotos(Int)

    public var description: String {
        switch self {
        case .negativeCount(let n): "a count must not be negative, not \(n)"
        case .tooMany(let n): "\(n) is more than one request may move (at most \(Inventory.maxMove))"
        case .tooManyPhotos(let n): "this node keeps photos of at most \(n) SKUs"
        }
    }
}
