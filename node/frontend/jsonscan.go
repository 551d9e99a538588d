package frontend

import "github.com/kvrouter/kvrouter/internal/oaiedge"

// scanner adapts oaiedge.Scanner to the response inspection (observe.go),
// which keeps its own cursor i over b. Each call hands the scanner the
// cursor and takes it back, also around the callbacks of object and array,
// so that nested calls share one cursor and one nesting depth.
type scanner struct {
	b []byte
	i int
	e oaiedge.Scanner
}

// at points the scanner at the cursor.
func (s *scanner) at() *oaiedge.Scanner {
	s.e.Seek(s.b, s.i)
	return &s.e
}

// back takes the cursor back from the scanner and passes err on.
func (s *scanner) back(err error) error {
	s.i = s.e.Pos()
	return err
}

// object is oaiedge.Scanner.Object.
func (s *scanner) object(f func(key []byte) error) error {
	e := s.at()
	return s.back(e.Object(func(key []byte) error {
		s.i = e.Pos()
		err := f(key)
		s.at()
		return err
	}))
}

// array is oaiedge.Scanner.Array.
func (s *scanner) array(f func(i int) error) error {
	e := s.at()
	return s.back(e.Array(func(i int) error {
		s.i = e.Pos()
		err := f(i)
		s.at()
		return err
	}))
}

// skip is oaiedge.Scanner.Skip.
func (s *scanner) skip() error { return s.back(s.at().Skip()) }

// null is oaiedge.Scanner.Null.
func (s *scanner) null() bool {
	ok := s.at().Null()
	s.i = s.e.Pos()
	return ok
}

// uint is oaiedge.Scanner.Uint.
func (s *scanner) uint(max uint64) (uint64, error) {
	v, err := s.at().Uint(max)
	return v, s.back(err)
}
