import Glibc
import OscarBase

extension UnsafeRawBufferPointer {
    /// True when these bytes are `text`'s UTF-8. Compared with `memcmp`:
    /// a generic element-by-element comparison of a 70-byte function name
    /// cost more than the rest of reading the call it came in.
    package func isUTF8(of text: String) -> Bool {
        let compared = text.utf8.withContiguousStorageIfAvailable { utf8 in
            utf8.count == count && (count == 0 || memcmp(baseAddress!, utf8.baseAddress!, count) == 0)
        }
        return compared ?? elementsEqual(text.utf8)
    }
}
