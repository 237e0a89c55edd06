import Crypto
import Foundation
import SwiftASN1
import X509

/// The simulator's TLS identity: a CA it makes, and a server certificate for localhost and
/// 127.0.0.1 signed by it. Workers trust the CA's PEM (`--trust-ca`, `PUSHHUB_PNS_CA`).
public struct SimulatorCertificates: Sendable {
    public var caPEM: String
    public var serverCertificatePEM: String
    public var serverKeyPEM: String

    /// `names` are extra DNS names for the server certificate (e.g. `sim` in docker-compose).
    public static func generate(names: [String] = [], now: Date = Date()) throws -> SimulatorCertificates {
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName { CommonName("PushHub simulator CA") }
        let ca = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(caKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(365 * 86400),
            issuer: caName, subject: caName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(caKey))
        let serverKey = P256.Signing.PrivateKey()
        let server = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(serverKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(365 * 86400),
            issuer: caName, subject: try DistinguishedName { CommonName("localhost") }, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(
                    [.dnsName("localhost"), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1]))] + names.map { .dnsName($0) })
            },
            issuerPrivateKey: .init(caKey))
        return SimulatorCertificates(
            caPEM: try ca.serializeAsPEM().pemString, serverCertificatePEM: try server.serializeAsPEM().pemString,
            serverKeyPEM: serverKey.pemRepresentation)
    }
}
