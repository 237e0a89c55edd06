// PushEnvironment: the environment variables PushHub's executables read, their defaults, the
// options they share (`KafkaOptions`) and the logging set-up (text or JSON lines).
