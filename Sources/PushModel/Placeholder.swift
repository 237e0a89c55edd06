public enum PushModelPlaceholder {}
