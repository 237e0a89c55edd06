// PushModel: PushHub's domain and wire types (SendRequest, DeliveryBatch, ResultBatch,
// installations, registrations, tags, templates, notification states), with no I/O.

extension StringProtocol where UTF8View: BidirectionalCollection {
    /// Without leading and trailing spaces and tabs, as HTTP trims header values: a scan of the
    /// UTF-8 bytes, where Foundation's `trimmingCharacters(in: .whitespaces)` bridges through
    /// NSString on every call.
    public var trimmingSpaces: SubSequence {
        let utf8 = self.utf8
        guard let first = utf8.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }) else { return self[endIndex..<endIndex] }
        let last = utf8.lastIndex(where: { $0 != 0x20 && $0 != 0x09 })!
        return self[first...last]
    }
}
