// PushSimulator: `pushhub sim`: the four PNS simulators, their certificates, simulated
// credentials and Web Push subscriptions.
