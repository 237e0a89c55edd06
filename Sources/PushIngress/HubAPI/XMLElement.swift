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

    /// Deepest element nesting read; an Atom registration entry needs 5.
    static let maximumDepth = 16
    /// Most elements in one document.
    static let maximumElements = 1000

    /// Parses a document; the error says where it is not well-formed or which limit it broke.
    static func parse(_ data: Data) throws -> XMLNode {
        // No document type declarations at all: entities are where XML bombs live.
        if data.range(of: Data("<!DOCTYPE".utf8)) != nil || data.range(of: Data("<!doctype".utf8)) != nil || data.range(of: Data("<!ENTITY".utf8)) != nil {
            throw HubAPIError(.badRequest, "the body's XML must not declare a document type or entities")
        }
        let builder = TreeBuilder()
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = true
        // No external entities or DTDs: bodies come from clients.
        parser.shouldResolveExternalEntities = false
        parser.delegate = builder
        guard parser.parse(), let root = builder.root else {
            if let limit = builder.brokenLimit { throw HubAPIError(.badRequest, limit) }
            let position = "line \(parser.lineNumber), column \(parser.columnNumber)"
            throw HubAPIError(.badRequest, "the body is not well-formed XML (\(position))")
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

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
        elements += 1
        if stack.count >= XMLNode.maximumDepth {
            brokenLimit = "the body's XML nests at most \(XMLNode.maximumDepth) elements deep"
        } else if elements > XMLNode.maximumElements {
            brokenLimit = "the body's XML holds at most \(XMLNode.maximumElements) elements"
        } else if root != nil {
            brokenLimit = "the body's XML has more than one root element"
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
        node.text = node.text.trimmingCharacters(in: .whitespacesAndNewlines)
        if stack.isEmpty { root = node } else { stack[stack.count - 1].children.append(node) }
    }
}
