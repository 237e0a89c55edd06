// PushIngress: the ingress as a library (`makeIngressServices`): SAS, the hub API, the app-backend
// API, outcomes, scheduled sends and the recovery of stalled sends.
