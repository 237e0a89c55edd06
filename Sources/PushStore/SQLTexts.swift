import Synchronization

/// Statement texts by the shape they are made from, each made once and kept. A statement whose
/// text is the same for every call but for its values (a single-user send's audience) was
/// made again each time, a string for each of its parts. Shapes may come from what clients
/// send (a tag expression's condition), so at most `limit` are kept: past it, all are dropped
/// and made again as they come, as the connections' statement caches do.
final class SQLTexts<Shape: Hashable & Sendable>: Sendable {
    private let made = Mutex<[Shape: String]>([:])
    let limit: Int

    init(limit: Int = 256) {
        self.limit = limit
    }

    /// The text of `shape`, made by `make` the first time.
    func text(for shape: Shape, make: (Shape) -> String) -> String {
        if let known = made.withLock({ $0[shape] }) { return known }
        let text = make(shape)
        made.withLock { texts in
            if texts.count >= limit { texts.removeAll() }
            texts[shape] = text
        }
        return text
    }

    /// How many texts are kept.
    var count: Int { made.withLock { $0.count } }
}
