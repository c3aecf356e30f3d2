public enum NoteSyncVersion { public static let string = "0.2.0" }
