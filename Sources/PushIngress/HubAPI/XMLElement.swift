import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// A parsed XML element: enough of a tree to read Atom registration entries.
struct XMLNode: Sendable {
    /// The local name, without namespace prefix.
    var name: String
    var attributes: [String: String]
    var children: [XMLNode]
    var text: String

    func child(_ name: String) -> XMLNode? { children.first { $0.name == name } }

    /// The first element named `name` at any depth, this one included.
    func find(where matches: (String) -> Bool) -> XMLNode? {
        if matches(name) { return self }
        for child in children {
            if let found = child.find(where: matches) { return found }
        }
        return nil
    }

    /// Parses a document; the error says where it is not well-formed.
    static func parse(_ data: Data) throws -> XMLNode {
        let builder = TreeBuilder()
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = true
        // No external entities or DTDs: bodies come from clients.
        parser.shouldResolveExternalEntities = false
        parser.delegate = builder
        guard parser.parse(), let root = builder.root else {
            let position = "line \(parser.lineNumber), column \(parser.columnNumber)"
            throw HubAPIError(.badRequest, "the body is not well-formed XML (\(position))")
        }
        return root
    }
}

private final class TreeBuilder: NSObject, XMLParserDelegate {
    var stack: [XMLNode] = []
    var root: XMLNode?

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
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
        node.text = node.text.trimmingCharacters(in: .whitespacesAndNewlines)
        if stack.isEmpty { root = node } else { stack[stack.count - 1].children.append(node) }
    }
}
