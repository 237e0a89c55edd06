// PushProviders: the PNS clients (APNs over HTTP/2, FCM v1, WNS, Web Push) and their protocol
// pieces: Web Push encryption and VAPID, provider and OAuth tokens, answer classification.
