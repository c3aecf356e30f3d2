public enum NoteSyncVersion { public static let string = "0.1.0" }
