// PushKafka: the only code that calls `rd_kafka_*`: producer, consumer, admin and the embedded
// cluster, plus record processing with a retry budget and dead letters.
