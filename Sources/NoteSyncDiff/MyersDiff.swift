import NoteSyncSupport

/// Myers' O(ND) difference algorithm on sequences of line numbers, in linear space.
///
/// The search for the middle snake and the divide-and-conquer follow GNU diff's `diffseq.h`
/// without its cost-cutting heuristics, so the result is always a shortest edit script.
/// Memory is O(N + M). Two cheap reductions come first: the common prefix and suffix, and lines
/// that occur on one side only (they can never match, so they are changes; this makes two
/// unrelated texts cost O(N + M) instead of O(N·M)).
enum MyersDiff {
    /// Marks which elements of `old` are deleted and which of `new` are inserted.
    ///
    /// The unmarked elements of both sides, in order, are a longest common subsequence.
    /// Elements must be small non-negative integers, as `LineText.interned` makes them.
    package static func changes(old: [Int], new: [Int]) -> (deleted: [Bool], inserted: [Bool]) {
        var deleted = [Bool](repeating: true, count: old.count)
        var inserted = [Bool](repeating: true, count: new.count)

        var low = 0
        while low < old.count, low < new.count, old[low] == new[low] {
            deleted[low] = false
            inserted[low] = false
            low += 1
        }
        var oldEnd = old.count
        var newEnd = new.count
        while oldEnd > low, newEnd > low, old[oldEnd - 1] == new[newEnd - 1] {
            oldEnd -= 1
            newEnd -= 1
            deleted[oldEnd] = false
            inserted[newEnd] = false
        }
        guard low < oldEnd, low < newEnd else {
            return (deleted, inserted)
        }

        let oldMiddle = old[low..<oldEnd]
        let newMiddle = new[low..<newEnd]
        let bound = max(oldMiddle.max() ?? 0, newMiddle.max() ?? 0) + 1
        var inOld = [Bool](repeating: false, count: bound)
        var inNew = [Bool](repeating: false, count: bound)
        for line in oldMiddle { inOld[line] = true }
        for line in newMiddle { inNew[line] = true }
        let oldIndices = oldMiddle.indices.filter { inNew[old[$0]] }
        let newIndices = newMiddle.indices.filter { inOld[new[$0]] }

        let (oldKept, newKept) = commonSubsequence(oldIndices.map { old[$0] }, newIndices.map { new[$0] })
        for (position, index) in oldIndices.enumerated() where oldKept[position] {
            deleted[index] = false
        }
        for (position, index) in newIndices.enumerated() where newKept[position] {
            inserted[index] = false
        }
        return (deleted, inserted)
    }

    /// Flags the elements of a longest common subsequence of `x` and `y`.
    private static func commonSubsequence(_ x: [Int], _ y: [Int]) -> (xKept: [Bool], yKept: [Bool]) {
        var xKept = [Bool](repeating: false, count: x.count)
        var yKept = [Bool](repeating: false, count: y.count)
        var search = MiddleSnakeSearch(x: x, y: y)
        var pending = [(xStart: 0, xEnd: x.count, yStart: 0, yEnd: y.count)]
        while let part = pending.popLast() {
            var (xStart, xEnd, yStart, yEnd) = part
            while xStart < xEnd, yStart < yEnd, x[xStart] == y[yStart] {
                xKept[xStart] = true
                yKept[yStart] = true
                xStart += 1
                yStart += 1
            }
            while xEnd > xStart, yEnd > yStart, x[xEnd - 1] == y[yEnd - 1] {
                xEnd -= 1
                yEnd -= 1
                xKept[xEnd] = true
                yKept[yEnd] = true
            }
            guard xStart < xEnd, yStart < yEnd else { continue }
            let (xMiddle, yMiddle) = search.split(xStart: xStart, xEnd: xEnd, yStart: yStart, yEnd: yEnd)
            pending.append((xMiddle, xEnd, yMiddle, yEnd))
            pending.append((xStart, xMiddle, yStart, yMiddle))
        }
        return (xKept, yKept)
    }
}

/// The forward and backward furthest-reaching paths of GNU diff's `diag`, reused across splits.
private struct MiddleSnakeSearch {
    let x: [Int]
    let y: [Int]
    /// Furthest x reached on each diagonal `x - y` by the forward and the backward search,
    /// stored at `diagonal + offset`.
    var forward: [Int]
    var backward: [Int]
    let offset: Int

    init(x: [Int], y: [Int]) {
        self.x = x
        self.y = y
        offset = y.count + 1
        forward = [Int](repeating: 0, count: x.count + y.count + 3)
        backward = forward
    }

    /// A point on a shortest edit path through the box that cuts it into two smaller boxes.
    ///
    /// The box must start and end with a mismatch (the caller strips matching ends).
    mutating func split(xStart: Int, xEnd: Int, yStart: Int, yEnd: Int) -> (Int, Int) {
        let minDiagonal = xStart - yEnd
        let maxDiagonal = xEnd - yStart
        let forwardMid = xStart - yStart
        let backwardMid = xEnd - yEnd
        var forwardMin = forwardMid
        var forwardMax = forwardMid
        var backwardMin = backwardMid
        var backwardMax = backwardMid
        let odd = (forwardMid - backwardMid) & 1 != 0
        let offset = offset

        forward[forwardMid + offset] = xStart
        backward[backwardMid + offset] = xEnd

        while true {
            if forwardMin > minDiagonal {
                forwardMin -= 1
                forward[forwardMin - 1 + offset] = -1
            } else {
                forwardMin += 1
            }
            if forwardMax < maxDiagonal {
                forwardMax += 1
                forward[forwardMax + 1 + offset] = -1
            } else {
                forwardMax -= 1
            }
            var diagonal = forwardMax
            while diagonal >= forwardMin {
                let below = forward[diagonal - 1 + offset]
                let above = forward[diagonal + 1 + offset]
                var xi = below < above ? above : below + 1
                var yi = xi - diagonal
                while xi < xEnd, yi < yEnd, x[xi] == y[yi] {
                    xi += 1
                    yi += 1
                }
                forward[diagonal + offset] = xi
                if odd, backwardMin <= diagonal, diagonal <= backwardMax, backward[diagonal + offset] <= xi {
                    return (xi, yi)
                }
                diagonal -= 2
            }

            if backwardMin > minDiagonal {
                backwardMin -= 1
                backward[backwardMin - 1 + offset] = Int.max
            } else {
                backwardMin += 1
            }
            if backwardMax < maxDiagonal {
                backwardMax += 1
                backward[backwardMax + 1 + offset] = Int.max
            } else {
                backwardMax -= 1
            }
            diagonal = backwardMax
            while diagonal >= backwardMin {
                let below = backward[diagonal - 1 + offset]
                let above = backward[diagonal + 1 + offset]
                var xi = below < above ? below : above - 1
                var yi = xi - diagonal
                while xi > xStart, yi > yStart, x[xi - 1] == y[yi - 1] {
                    xi -= 1
                    yi -= 1
                }
                backward[diagonal + offset] = xi
                if !odd, forwardMin <= diagonal, diagonal <= forwardMax, xi <= forward[diagonal + offset] {
                    return (xi, yi)
                }
                diagonal -= 2
            }
        }
    }
}
