package deploy

import (
	"sync"
	"testing"

	"github.com/nats-io/jwt/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// testAccounts is the decentralised NATS auth the manifests expect
// (an operator, one account, users with .creds files, as nsc makes them),
// generated once per test binary: the StatefulSet's pods get real
// credentials and the test's NATS server checks them.
type testAccounts struct {
	operator   *jwt.OperatorClaims
	operatorKP nkeys.KeyPair
	accountKP  nkeys.KeyPair
	accountJWT string
}

var (
	accountsOnce sync.Once
	accounts     *testAccounts
	accountsErr  error
)

// natsAccounts returns the test's operator and account.
func natsAccounts(t *testing.T) *testAccounts {
	t.Helper()
	accountsOnce.Do(func() { accounts, accountsErr = newTestAccounts() })
	if accountsErr != nil {
		t.Fatal(accountsErr)
	}
	return accounts
}

func newTestAccounts() (*testAccounts, error) {
	okp, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	opub, _ := okp.PublicKey()
	op := jwt.NewOperatorClaims(opub)
	op.Name = "kvrouter-test"
	akp, err := nkeys.CreateAccount()
	if err != nil {
		return nil, err
	}
	apub, _ := akp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "KVROUTER"
	ajwt, err := ac.Encode(okp)
	if err != nil {
		return nil, err
	}
	return &testAccounts{operator: op, operatorKP: okp, accountKP: akp, accountJWT: ajwt}, nil
}

// creds returns a user's .creds file in the account.
func (a *testAccounts) creds(t *testing.T, name string) []byte {
	t.Helper()
	ukp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Name = name
	ujwt, err := uc.Encode(a.accountKP)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := ukp.Seed()
	out, err := jwt.FormatUserConfig(ujwt, seed)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// configure makes opts trust the operator and resolve its account from
// memory.
func (a *testAccounts) configure(t *testing.T, opts *natsserver.Options) {
	t.Helper()
	opts.TrustedOperators = []*jwt.OperatorClaims{a.operator}
	res := &natsserver.MemAccResolver{}
	apub, _ := a.accountKP.PublicKey()
	if err := res.Store(apub, a.accountJWT); err != nil {
		t.Fatal(err)
	}
	opts.AccountResolver = res
}
