import CLibUV
import OscarBase
import OscarCBOR

/// Allocation and release of libuv handles, with one rule: libuv keeps the
/// pointers it is given, so a handle's memory and its owner live until libuv
/// calls the close callback, and are freed only there.
///
/// The owner (whatever `handle.data` points to) is retained with
/// `Unmanaged.passRetained` while the handle is open and released in the close
/// callback, so a callback can never see a freed owner.
package enum UVHandle {
    /// Allocates zeroed memory for a handle of type `T`, counted by `loop`.
    package static func allocate<T>(_: T.Type, on loop: EventLoop) -> UnsafeMutablePointer<T> {
        let raw = UnsafeMutableRawPointer.allocate(
            byteCount: MemoryLayout<T>.size, alignment: MemoryLayout<T>.alignment)
        raw.initializeMemory(as: UInt8.self, repeating: 0, count: MemoryLayout<T>.size)
        loop.handleOpened()
        return raw.bindMemory(to: T.self, capacity: 1)
    }

    /// Stores a retained reference to `owner` in the handle's `data` field.
    package static func retainOwner(_ owner: AnyObject, in handle: UnsafeMutableRawPointer) {
        handle.assumingMemoryBound(to: uv_handle_t.self).pointee.data = Unmanaged.passRetained(owner).toOpaque()
    }

    /// The owner stored by `retainOwner`, not retained again.
    package static func owner<Owner: AnyObject>(of handle: UnsafeMutableRawPointer?, as _: Owner.Type) -> Owner {
        let data = handle!.assumingMemoryBound(to: uv_handle_t.self).pointee.data!
        return Unmanaged<Owner>.fromOpaque(data).takeUnretainedValue()
    }

    /// Closes the handle unless it is already closing. Its owner is released and
    /// its memory freed in the close callback.
    package static func close(_ handle: UnsafeMutableRawPointer) {
        let h = handle.assumingMemoryBound(to: uv_handle_t.self)
        guard uv_is_closing(h) == 0 else { return }
        uv_close(h, closed)
    }
}

/// The close callback of every handle Oscar opens: the one place handle memory is freed.
private func closed(_ handle: UnsafeMutablePointer<uv_handle_t>?) {
    guard let handle else { return }
    let loop = EventLoop.owning(handle.pointee.loop)
    if let data = handle.pointee.data {
        Unmanaged<AnyObject>.fromOpaque(data).release()
    }
    UnsafeMutableRawPointer(handle).deallocate()
    loop.handleClosed()
}
