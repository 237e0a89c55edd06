// PushModel: PushHub's domain and wire types (SendRequest, DeliveryBatch, ResultBatch,
// installations, registrations, tags, templates, notification states), with no I/O.
