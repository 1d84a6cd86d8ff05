package caldav

// IntentIDFromResourceName is for the tests of package caldav_test.
var IntentIDFromResourceName = intentIDFromResourceName
