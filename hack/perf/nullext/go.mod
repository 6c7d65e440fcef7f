module phalanx.local/nullext

go 1.22
