package main

import (
	"os"
	"os/signal"
	"syscall"
)

// signalRestart delivers SIGUSR1, the harness's "restart kube-apiserver".
func signalRestart(c chan<- os.Signal) { signal.Notify(c, syscall.SIGUSR1) }
