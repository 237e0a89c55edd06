/// Which records of one partition were handed out and which are done, so the offset stored
/// for commit never passes a record that is still being worked on.
///
/// Records are handed out in offset order but may finish in any order; the offset to store is
/// the first record not yet done (or one past the last handed out when all are done).
struct OffsetProgress: Sendable {
    private var offsets: [Int64] = []
    private var done: [Bool] = []
    private var head = 0
    private var nextAfterLast: Int64?

    /// Records handed out and not yet done, including those behind an unfinished one.
    var pendingCount: Int { offsets.count - head }

    mutating func handedOut(_ offset: Int64) {
        offsets.append(offset)
        done.append(false)
        nextAfterLast = offset + 1
    }

    /// Marks `offset` done. Returns the offset to store when the committable position moved.
    mutating func markDone(_ offset: Int64) -> Int64? {
        guard let index = indexOfPending(offset), !done[index] else { return nil }
        done[index] = true
        guard index == head else { return nil }
        while head < offsets.count, done[head] { head += 1 }
        let committable = head < offsets.count ? offsets[head] : nextAfterLast!
        compactIfWorthIt()
        return committable
    }

    private func indexOfPending(_ offset: Int64) -> Int? {
        var low = head
        var high = offsets.count
        while low < high {
            let middle = (low + high) / 2
            if offsets[middle] < offset { low = middle + 1 } else { high = middle }
        }
        return low < offsets.count && offsets[low] == offset ? low : nil
    }

    private mutating func compactIfWorthIt() {
        guard head >= 1024, head * 2 >= offsets.count else { return }
        offsets.removeFirst(head)
        done.removeFirst(head)
        head = 0
    }
}
