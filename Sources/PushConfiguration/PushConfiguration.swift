// PushConfiguration: `pushhub.yaml` (hubs, SAS rules, PNS credentials, endpoints, `recovery`): loading,
// validation with the field named, and the development hub.
