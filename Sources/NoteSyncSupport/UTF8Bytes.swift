import Foundation

/// Byte-level tests of a string's UTF-8, done on its contiguous storage (`memcmp`, a plain loop) where it has one
/// (native and small strings: every string a walk or the state database makes), else through the UTF-8 view.
///
/// Not `String`'s `==` and `<`: those compare canonical equivalence, so a name in NFD and its NFC twin are "equal"
/// there while they are two files on disk. A scan asks these for every file, and the views' iterators cost more
/// than the rest of a file's bookkeeping.
package enum UTF8Bytes {
    /// Whether `a` and `b` hold the same bytes.
    package static func equal(_ a: String, _ b: String) -> Bool {
        let fast = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in
                x.count == y.count && (x.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0)
            }
        }
        if case let same?? = fast { return same }
        return a.utf8.elementsEqual(b.utf8)
    }

    /// Whether `a` comes before `b` in byte order (`a` a proper prefix of `b` included).
    package static func precedes(_ a: String, _ b: String) -> Bool {
        let fast = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y -> Bool in
                let shorter = Swift.min(x.count, y.count)
                let order = shorter == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, shorter)
                return order != 0 ? order < 0 : x.count < y.count
            }
        }
        if case let before?? = fast { return before }
        return a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    /// Whether every byte of `text` is ASCII (below 0x80).
    package static func isASCII(_ text: String) -> Bool {
        let fast = text.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            var any: UInt8 = 0
            for byte in bytes { any |= byte }
            return any < 0x80
        }
        return fast ?? text.utf8.allSatisfy { $0 < 0x80 }
    }
}
