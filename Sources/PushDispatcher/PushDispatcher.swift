// PushDispatcher: the dispatcher as a library (`makeDispatcherServices`): SendRequests to
// DeliveryBatches and dispatch summaries, with dead letters.
