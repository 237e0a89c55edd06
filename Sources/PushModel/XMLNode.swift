import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// A parsed XML element: enough of a tree to read Atom registration entries.
public struct XMLNode: Sendable {
    /// The local name, without namespace prefix.
    public var name: String
    public var attributes: [String: String]
    public var children: [XMLNode]
    public var text: String

    public func child(_ name: String) -> XMLNode? { children.first { $0.name == name } }

    /// The first element named `name` at any depth, this one included.
    public func find(where matches: (String) -> Bool) -> XMLNode? {
        if matches(name) { return self }
        for child in children {
            if let found = child.find(where: matches) { return found }
        }
        return nil
    }

    /// Deepest element nesting read; an Atom registration entry needs 5.
    public static let maximumDepth = 16
    /// Most elements in one document.
    public static let maximumElements = 1000

    /// True when `data` holds `<?` anywhere but in a well-formed XML declaration at its start,
    /// inside comments and CDATA sections too (a `<?` there is refused with the rest).
    /// One pass over the bytes: an import parses a document a line, and Foundation's `Data`
    /// searches were a sixth of its CPU.
    static func hasProcessingInstruction(_ data: Data) -> Bool {
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Bool in
            let bytes = bytes.bindMemory(to: UInt8.self)
            func starts(_ text: StaticString, at index: Int) -> Bool {
                let count = text.utf8CodeUnitCount
                guard index + count <= bytes.count else { return false }
                return memcmp(bytes.baseAddress! + index, text.utf8Start, count) == 0
            }
            func find(_ text: StaticString, from index: Int) -> Int? { XMLNode.find(text, in: bytes, from: index) }
            var index = starts("\u{FEFF}", at: 0) ? 3 : 0
            if starts("<?xml", at: index), index + 5 < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index + 5]) {
                // The declaration: closed by ?> before any other markup.
                guard let end = find("?>", from: index + 5),
                    !bytes[(index + 5)..<end].contains(where: { $0 == UInt8(ascii: "<") || $0 == UInt8(ascii: ">") })
                else { return true }
                index = end + 2
            }
            // Anywhere after it, comments and CDATA included: libxml2 recovering from broken
            // markup reads a `<?` the scan took for a comment's text as an instruction (the
            // atom fuzz target crashed the parser so: `<a<b <!-- … <?…?>` with no `-->`).
            return find("<?", from: index) != nil
        }
    }

    /// True when `data` holds `text` anywhere.
    static func contains(_ data: Data, _ text: StaticString) -> Bool {
        data.withUnsafeBytes { find(text, in: $0.bindMemory(to: UInt8.self), from: 0) != nil }
    }

    /// Where `text` first is in `bytes` from `index`: memchr to each place its first byte is,
    /// memcmp there.
    static func find(_ text: StaticString, in bytes: UnsafeBufferPointer<UInt8>, from index: Int) -> Int? {
        let count = text.utf8CodeUnitCount
        guard let base = bytes.baseAddress, count > 0 else { return nil }
        var index = index
        while index + count <= bytes.count,
            let found = memchr(base + index, Int32(text.utf8Start.pointee), bytes.count - index - count + 1)
        {
            let at = UnsafePointer(found.assumingMemoryBound(to: UInt8.self)) - base
            if memcmp(base + at, text.utf8Start, count) == 0 { return at }
            index = at + 1
        }
        return nil
    }

    /// Parses a document; the error says where it is not well-formed or which limit it broke.
    public static func parse(_ data: Data) throws(WireError) -> XMLNode {
        // No document type declarations at all: entities are where XML bombs live.
        if contains(data, "<!DOCTYPE") || contains(data, "<!doctype") || contains(data, "<!ENTITY") {
            throw .invalidField(field: "body", reason: "the XML must not declare a document type or entities")
        }
        // Foundation's XMLParser traps on names that are not UTF-8: only UTF-8 goes in, and a
        // document may not declare another encoding.
        guard String(validating: data, as: UTF8.self) != nil else { throw .invalidField(field: "body", reason: "the XML must be UTF-8") }
        let prolog = String(decoding: data.prefix(256), as: UTF8.self).lowercased()
        if prolog.hasPrefix("<?xml") || prolog.hasPrefix("\u{FEFF}<?xml"), let end = prolog.range(of: "?>"),
            let encoding = prolog[..<end.lowerBound].range(of: "encoding")
        {
            let value = prolog[encoding.upperBound..<end.lowerBound].filter { !" =\t\r\n\"'".contains($0) }
            guard value.hasPrefix("utf-8") || value.hasPrefix("utf8") else {
                throw .invalidField(field: "body", reason: "the XML must be UTF-8 and declare no other encoding")
            }
        }
        // Foundation's XMLParser reads a processing instruction without data as a null string
        // and crashes: none is allowed but the XML declaration at the very start.
        if hasProcessingInstruction(data) {
            throw .invalidField(field: "body", reason: "the XML must hold no processing instructions")
        }
        let builder = TreeBuilder()
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = true
        // No external entities or DTDs: bodies come from clients.
        parser.shouldResolveExternalEntities = false
        parser.delegate = builder
        guard parser.parse(), let root = builder.root else {
            if let limit = builder.brokenLimit { throw .invalidField(field: "body", reason: limit) }
            let position = "line \(parser.lineNumber), column \(parser.columnNumber)"
            throw .invalidField(field: "body", reason: "not well-formed XML (\(position))")
        }
        return root
    }
}

private final class TreeBuilder: NSObject, XMLParserDelegate {
    var stack: [XMLNode] = []
    var root: XMLNode?
    var elements = 0
    /// Why parsing was stopped early, when a limit was broken.
    var brokenLimit: String?

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]
    ) {
        elements += 1
        if stack.count >= XMLNode.maximumDepth {
            brokenLimit = "the XML nests at most \(XMLNode.maximumDepth) elements deep"
        } else if elements > XMLNode.maximumElements {
            brokenLimit = "the XML holds at most \(XMLNode.maximumElements) elements"
        } else if root != nil {
            brokenLimit = "the XML has more than one root element"
        }
        if brokenLimit != nil {
            parser.abortParsing()
            return
        }
        stack.append(XMLNode(name: elementName, attributes: attributes, children: [], text: ""))
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if !stack.isEmpty { stack[stack.count - 1].text += string }
    }

    func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
        if !stack.isEmpty { stack[stack.count - 1].text += String(decoding: CDATABlock, as: UTF8.self) }
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        guard var node = stack.popLast() else { return }
        // Most texts have no space at either end; Foundation's trimming was a tenth of an import.
        if let first = node.text.unicodeScalars.first, let last = node.text.unicodeScalars.last,
            first.properties.isWhitespace || last.properties.isWhitespace
        {
            node.text = node.text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if stack.isEmpty { root = node } else { stack[stack.count - 1].children.append(node) }
    }
}
