import PushStore

/// The parts of the store the ingress uses, each named. A part the routes need is a required
/// member; the optional ones are left out by choice, and what their routes answer then is
/// written here, so nothing depends on what else one store type happens to be.
public struct IngressStores: Sendable {
    /// Installations and registrations (the hub API, `/api/register`).
    public var registrations: any RegistrationStore
    /// The app-backend API's users, for Basic logins.
    public var users: any UserStore
    /// Per-notification outcomes. Without them sends are not recorded and
    /// `GET /{hub}/messages/{id}` answers 404.
    public var outcomes: (any OutcomeStore)?
    /// Scheduled sends. Without them `POST /{hub}/schedulednotifications` answers 503 and
    /// cancelling one answers 404.
    public var schedules: (any ScheduleStore)?
    /// Rich payloads. Without them `POST /api/notifications/rich` answers 503 and fetching one
    /// answers 404.
    public var richPayloads: (any RichPayloadStore)?
    /// Idempotency keys. Without them a send with `Idempotency-Key` answers 503.
    public var idempotency: (any IdempotencyStore)?
    /// Import and export jobs. Without them `/{hub}/jobs` answers 503.
    public var jobs: (any JobStore)?
    /// What the web console reads: device counts, recent sends. Without it the console's
    /// overview leaves those out and its notifications page answers 503.
    public var console: (any ConsoleStore)?

    /// Whether the outcome store is the registration store itself (one database, as
    /// `init(_:)` makes them): a send's audience can then be read in the transaction that
    /// notes the send.
    public var outcomesHoldRegistrations: Bool {
        guard let outcomes, type(of: registrations) is AnyClass else { return false }
        return (registrations as AnyObject) === (outcomes as AnyObject)
    }

    /// Each part given on its own; pass nil to leave an optional part out.
    public init(
        registrations: any RegistrationStore, users: any UserStore, outcomes: (any OutcomeStore)?, schedules: (any ScheduleStore)?,
        richPayloads: (any RichPayloadStore)?, idempotency: (any IdempotencyStore)? = nil,
        jobs: (any JobStore)? = nil, console: (any ConsoleStore)? = nil
    ) {
        self.registrations = registrations
        self.users = users
        self.outcomes = outcomes
        self.schedules = schedules
        self.richPayloads = richPayloads
        self.idempotency = idempotency
        self.jobs = jobs
        self.console = console
    }

    /// Every part from one store that keeps them all, such as `SQLRegistrationStore`.
    public init(_ store: some RegistrationStore & OutcomeStore & ScheduleStore & RichPayloadStore & IdempotencyStore & JobStore & ConsoleStore) {
        self.init(
            registrations: store, users: store, outcomes: store, schedules: store, richPayloads: store, idempotency: store, jobs: store,
            console: store)
    }
}
