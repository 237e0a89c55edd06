import Foundation
import Logging
import PushConfiguration
import PushMetrics
import PushModel
import PushStore
import ServiceLifecycle

/// What the ingress does about sends that stall, from `recovery` in `pushhub.yaml`.
public struct SendRecoverySettings: Sendable {
    /// Keep each accepted send in the store until it ends, and publish it again when it stalls.
    public var republish: Bool
    /// At start, publish every kept send at once: the broker lost everything (the embedded
    /// cluster starts empty).
    public var republishAllAtStart: Bool
    public var checkEvery: Duration
    /// How long a send may make no progress before it is published again, or, past its
    /// deadline, given up.
    public var grace: TimeInterval
    /// The deadline of a send without `expiresAt`, after acceptance.
    public var abandonAfter: TimeInterval
    /// How long an ended send is kept from its end; the recovery round deletes it after that.
    public var keepEnded: TimeInterval = SendRecoveryConfiguration.defaultKeepEnded
    /// How long a round may spend deleting ended sends (at least one transaction of 500). A
    /// backlog bigger than a round deletes goes over the rounds after it.
    public var endedSweepPerRound: Duration = .seconds(5)
    /// How often one send is published, at most (the first time included).
    public var maximumPublishes = 10
    /// How long the dispatcher remembers a dispatched notification id (pushhub.yaml's
    /// `dispatchDedupeSeconds`); older notes are deleted by the recovery round.
    public var dispatchDedupeWindow: TimeInterval = 86_400

    public init(republish: Bool, republishAllAtStart: Bool = false, checkEvery: Duration, grace: TimeInterval, abandonAfter: TimeInterval) {
        self.republish = republish
        self.republishAllAtStart = republishAllAtStart
        self.checkEvery = checkEvery
        self.grace = grace
        self.abandonAfter = abandonAfter
    }

    /// From `pushhub.yaml`; `embeddedKafka` when the broker keeps nothing across a restart.
    public init(_ configuration: SendRecoveryConfiguration, embeddedKafka: Bool) {
        self.init(
            republish: configuration.republishes(embeddedKafka: embeddedKafka), republishAllAtStart: embeddedKafka,
            checkEvery: .milliseconds(Int64((configuration.checkEvery * 1000).rounded())), grace: configuration.grace,
            abandonAfter: configuration.abandonAfter)
        keepEnded = configuration.keepEnded
    }

    /// `request` as it goes out when accepted (or released) at `now`: without an `expiresAt`
    /// of its own it gets `abandonAfter` from now, so the workers expire its targets when the
    /// ingress gives it up.
    public func stamped(_ request: SendRequest, acceptedAt now: Date) -> SendRequest {
        guard request.expiresAt == nil else { return request }
        var stamped = request
        stamped.expiresAt = max(now, request.enqueuedAt).addingTimeInterval(abandonAfter)
        return stamped
    }
}

/// Runs in every ingress with Kafka. Each `checkEvery` it gives up sends past their deadline
/// plus `grace` that made no progress in the last `grace` (state Abandoned, unreported targets
/// expired), and, when republishing, publishes again the kept sends that made no progress in
/// the last `grace`. The store's claims make one replica handle each send.
public final class SendRecovery: Service, Sendable {
    /// Counted targets of ended sends deleted in one transaction, and the pause after it.
    static let targetsSweptAtOnce = 2_000
    static let sweepPause: Duration = .milliseconds(5)
    /// Ended sends past `keepEnded` deleted in one transaction (each with its counts and
    /// schedule: a few rows), with the same pause after it.
    static let endedSendsSweptAtOnce = 500

    let store: any OutcomeStore
    let publisher: any NotificationPublisher
    let settings: SendRecoverySettings
    let now: @Sendable () -> Date
    let logger: Logger
    /// Told how many sends the first check published again.
    let onStart: @Sendable (Int) -> Void
    let republished: Counter
    let abandoned: Counter

    public init(
        store: any OutcomeStore, publisher: any NotificationPublisher, settings: SendRecoverySettings, logger: Logger,
        metrics: MetricsRegistry = .shared, now: @escaping @Sendable () -> Date = { Date() }, onStart: @escaping @Sendable (Int) -> Void = { _ in }
    ) {
        self.store = store
        self.publisher = publisher
        self.settings = settings
        self.logger = logger
        self.now = now
        self.onStart = onStart
        republished = metrics.counter(
            "pushhub_sends_republished_total", help: "Accepted sends published again because they stalled or the broker lost them.")
        abandoned = metrics.counter("pushhub_sends_abandoned_total", help: "Sends given up (Abandoned) after no progress past their deadline.")
    }

    public func run() async throws {
        onStart(await check(everything: settings.republishAllAtStart))
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: self.settings.checkEvery) }
            guard !Task.isShuttingDownGracefully, !Task.isCancelled else { break }
            _ = await check(everything: false)
        }
    }

    /// One round: gives up stalled sends past their deadline, deletes the counted targets
    /// that ended sends left and what is past its time (keys, notes, error details, feedback,
    /// unused registration ids), publishes again what stalled (every kept send when
    /// `everything`), then deletes sends ended more than `keepEnded` ago. Returns how many it
    /// published.
    @discardableResult
    public func check(everything: Bool = false) async -> Int {
        let now = now()
        do {
            while true {
                let ended = try await store.abandonStalled(now: now, grace: settings.grace, abandonAfter: settings.abandonAfter, limit: 100)
                for send in ended {
                    abandoned.increment()
                    logger.warning(
                        "send abandoned",
                        metadata: [
                            "pushhub.notification_id": "\(send.notificationId)", "pushhub.hub": "\(send.hub)", "pushhub.reason": "\(send.reason)",
                        ])
                }
                if ended.count < 100 { break }
            }
        } catch {
            logger.error("stalled sends could not be checked", metadata: ["pushhub.error": "\(error)"])
        }
        // The counted targets ended sends left, a transaction of 2,000 at a time with a pause
        // after each, so the sends accepted meanwhile wait for the writer a few milliseconds
        // at most. (20,000 back to back held it for tens of milliseconds at a time: single-user
        // sends accepted while a broadcast to a million was swept had accept p99 81 ms.)
        do {
            while try await store.sweepEndedTargets(limit: Self.targetsSweptAtOnce), !Task.isCancelled {
                try? await Task.sleep(for: Self.sweepPause)
            }
        } catch {
            logger.error("counted targets of ended sends could not be deleted", metadata: ["pushhub.error": "\(error)"])
        }
        do {
            try await store.sweepExpired(now: now, keys: IdempotentSends.window, dispatches: settings.dispatchDedupeWindow)
        } catch {
            logger.error("expired keys, dispatch notes and feedback could not be deleted", metadata: ["pushhub.error": "\(error)"])
        }
        let published = settings.republish ? await republishStalled(now: now, everything: everything) : 0
        await sweepEndedSends(now: now)
        return published
    }

    /// Publishes again the kept sends that stalled (every one when `everything`); returns how
    /// many.
    private func republishStalled(now: Date, everything: Bool) async -> Int {
        var published = 0
        var failed = 0
        do {
            while true {
                // A claimed send's publish time becomes `now`, so this loop does not claim it again.
                let claimed = try await store.claimUnfinished(
                    now: now, grace: everything ? 0 : settings.grace, maximumPublishes: settings.maximumPublishes, limit: 100)
                for request in claimed {
                    do {
                        try await publisher.republish(request)
                        published += 1
                        republished.increment()
                    } catch {
                        // Claimed again after the next, longer wait.
                        failed += 1
                        logger.error(
                            "unfinished send not published, will retry",
                            metadata: [
                                "pushhub.notification_id": "\(request.notificationId)", "pushhub.error": "\(error)",
                            ])
                    }
                }
                if claimed.count < 100 { break }
            }
        } catch {
            logger.error("unfinished sends could not be claimed", metadata: ["pushhub.error": "\(error)"])
        }
        if published > 0 || failed > 0 {
            logger.notice("unfinished sends published again", metadata: ["pushhub.sends": "\(published)", "pushhub.failed": "\(failed)"])
        }
        return published
    }

    /// Deletes the sends that ended more than `keepEnded` ago, `endedSendsSweptAtOnce` to a
    /// transaction with a pause after each, as the counted targets: the store would otherwise
    /// keep a row or more for every send ever accepted. It runs last in a round, and for at
    /// most `endedSweepPerRound`: a backlog (the first round after an upgrade, or after the
    /// ingress was down for days) goes over several rounds, not in one that holds up the next
    /// round's abandoning and republishing, or a graceful shutdown.
    private func sweepEndedSends(now: Date) async {
        let cutoff = now.addingTimeInterval(-settings.keepEnded)
        let clock = ContinuousClock()
        let until = clock.now.advanced(by: settings.endedSweepPerRound)
        do {
            while try await store.sweepEndedSends(endedBefore: cutoff, limit: Self.endedSendsSweptAtOnce) == Self.endedSendsSweptAtOnce,
                clock.now < until, !Task.isCancelled, !Task.isShuttingDownGracefully
            {
                try? await Task.sleep(for: Self.sweepPause)
            }
        } catch {
            logger.error("sends that ended past their keeping could not be deleted", metadata: ["pushhub.error": "\(error)"])
        }
    }
}
