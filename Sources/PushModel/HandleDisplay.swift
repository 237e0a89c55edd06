/// How a device handle is shown to people (debug-send results, lists of failed targets): a
/// long handle by its first 12 and last 8 characters, enough to tell devices apart and to find
/// one in an app's logs, as Azure's test-send results shorten them. Never a whole token.
public enum HandleDisplay {
    public static func shortened(_ handle: String) -> String {
        guard handle.count > 24 else { return handle }
        return "\(handle.prefix(12))...\(handle.suffix(8))"
    }
}
