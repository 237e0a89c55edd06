import Crypto
import Foundation
import PushConfiguration
import PushModel
import _CryptoExtras

/// Checks Bearer JWTs for the app-backend API: the configured algorithm only (never `none`),
/// the signature, `exp` (required), `nbf`, `iss` and `aud`; the user is the configured claim.
struct JWTVerifier: Sendable {
    /// Raw key bytes: swift-crypto's key types are not Sendable, and rebuilding them is cheap.
    enum Key: Sendable {
        case hmac(Data)
        case rsa(derRepresentation: Data)
        case p256(x963Representation: Data)
    }

    let configuration: HubsConfiguration.AppBackend.JWT
    let key: Key
    /// Clock skew tolerated on `exp` and `nbf`.
    static let leeway: TimeInterval = 30

    init(_ configuration: HubsConfiguration.AppBackend.JWT) throws {
        self.configuration = configuration
        switch configuration.algorithm {
        case .HS256: key = .hmac(Data((configuration.secret ?? "").utf8))
        case .RS256: key = .rsa(derRepresentation: try _RSA.Signing.PublicKey(pemRepresentation: configuration.publicKey ?? "").derRepresentation)
        case .ES256: key = .p256(x963Representation: try P256.Signing.PublicKey(pemRepresentation: configuration.publicKey ?? "").x963Representation)
        }
    }

    /// The user a valid token names; the error says why a token is refused.
    func user(from token: String, now: Date) throws(AuthenticationError) -> String {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(String(parts[0])), let payloadData = Base64URL.decode(String(parts[1])),
            let signature = Base64URL.decode(String(parts[2]))
        else { throw .invalid("the token is not a JWT (three base64url parts)") }
        guard let header = JSONLimits.dictionary(headerData), let algorithm = header["alg"] as? String else {
            throw .invalid("the token's header is not JSON with an alg")
        }
        guard algorithm == configuration.algorithm.rawValue else {
            throw .invalid("the token is signed with \(algorithm); this server takes \(configuration.algorithm.rawValue)")
        }
        let signed = Data(parts[0].utf8) + Data(".".utf8) + Data(parts[1].utf8)
        guard verify(signature, over: signed) else { throw .invalid("the token's signature is not valid") }
        guard let claims = JSONLimits.dictionary(payloadData) else {
            throw .invalid("the token's claims are not a JSON object")
        }
        guard let expiry = (claims["exp"] as? NSNumber)?.doubleValue else { throw .invalid("the token has no exp claim") }
        guard expiry + Self.leeway > now.timeIntervalSince1970 else { throw .invalid("the token has expired") }
        if let notBefore = (claims["nbf"] as? NSNumber)?.doubleValue, notBefore - Self.leeway > now.timeIntervalSince1970 {
            throw .invalid("the token is not valid yet")
        }
        guard claims["iss"] as? String == configuration.issuer else { throw .invalid("the token's issuer is not \(configuration.issuer)") }
        let audiences = (claims["aud"] as? [String]) ?? [claims["aud"] as? String].compactMap { $0 }
        guard audiences.contains(configuration.audience) else { throw .invalid("the token's audience is not \(configuration.audience)") }
        let claim = configuration.userClaim ?? "sub"
        guard let user = claims[claim] as? String, !user.isEmpty else { throw .invalid("the token has no \(claim) claim naming the user") }
        return user
    }

    private func verify(_ signature: Data, over data: Data) -> Bool {
        switch key {
        case .hmac(let secret):
            return HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: data, using: SymmetricKey(data: secret))
        case .rsa(let der):
            guard let publicKey = try? _RSA.Signing.PublicKey(derRepresentation: der) else { return false }
            return publicKey.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: data, padding: .insecurePKCS1v1_5)
        case .p256(let x963):
            guard let publicKey = try? P256.Signing.PublicKey(x963Representation: x963),
                let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
            else { return false }
            return publicKey.isValidSignature(ecdsa, for: data)
        }
    }
}

/// Why the app-backend API did not accept who the caller says they are.
enum AuthenticationError: Error, Sendable, Equatable {
    case missing
    case invalid(String)
    /// Too many failed logins from this client lately, or too many password checks at once:
    /// try again after the seconds given.
    case throttled(retryAfter: Int, String)

    var message: String {
        switch self {
        case .missing: "authenticate with Basic (user name and password) or a Bearer token"
        case .invalid(let why): why
        case .throttled(_, let why): why
        }
    }
}
