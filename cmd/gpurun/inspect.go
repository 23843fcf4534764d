package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun/tensors/modelfile"
)

func newInspect() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Show a model file's or .task bundle's metadata and every tensor with its type, shape, size and quantization",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := modelfile.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			s := f.Summary()
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(s)
			}
			return s.WriteText(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return cmd
}
