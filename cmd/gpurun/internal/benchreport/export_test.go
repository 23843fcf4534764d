package benchreport

// Sample is a report with every kind of content (see sampleReport).
var Sample = sampleReport
