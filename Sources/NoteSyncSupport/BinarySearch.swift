/// Binary search over indices, for sorted arrays held as index orders (no collection of their own to search).
public enum BinarySearch {
    /// The first index in `0..<count` where `isBefore` is false (it is true for a prefix of them).
    public static func lowerBound(_ count: Int, _ isBefore: (Int) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if isBefore(middle) { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
