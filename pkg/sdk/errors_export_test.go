package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

func TestErrorQuestionsAnswerAsTheContract(t *testing.T) {
	tests := []struct {
		name          string
		err           error
		wantPermanent bool
		wantReason    string
	}{
		{name: "permanent", err: sdk.Permanent("TicketRejected", errors.New("rejected")), wantPermanent: true, wantReason: "TicketRejected"},
		{name: "retryable", err: sdk.Retryable("Busy", errors.New("busy")), wantReason: "Busy"},
		{name: "wrapped", err: fmt.Errorf("create: %w", sdk.Permanent("NotFound", errors.New("gone"))), wantPermanent: true, wantReason: "NotFound"},
		{name: "deadline", err: fmt.Errorf("call: %w", context.DeadlineExceeded), wantReason: contract.ReasonTimeout},
		{name: "plain", err: errors.New("plain")},
		{name: "nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantPermanent, sdk.IsPermanent(tt.err))
			assert.Equal(t, tt.wantReason, sdk.OwnReason(tt.err))
			// Each is the contract's own answer.
			assert.Equal(t, contract.IsPermanent(tt.err), sdk.IsPermanent(tt.err))
			assert.Equal(t, contract.OwnReason(tt.err), sdk.OwnReason(tt.err))
		})
	}
}
