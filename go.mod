module github.com/tobe-body/tobe-body

go 1.26.0

require (
	golang.org/x/sys v0.50.0
	periph.io/x/conn/v3 v3.7.3
)

require go.uber.org/goleak v1.3.0 // indirect
