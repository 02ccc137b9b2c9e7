// HalfTunesKit: the client library for halftunesd, shaped after URLSession's background API.

// The wire types (TaskInfo, Event, SessionConfiguration, ...) are part of this library's API.
@_exported import HalfTunesProtocol
