// Command gpurun converts, inspects and runs large language models on the GPU
// (WebGPU or Vulkan) or the CPU.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpurun:", err)
		if errors.Is(err, context.Canceled) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "gpurun",
		Short:         "Run large language models on the GPU (WebGPU, Vulkan) or the CPU",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newConvert(), newBundle(), newInspect(), newTokenize(), newRun(), newDevices(), newBench())
	return root
}
