package tokenize

import (
	"strconv"
	"strings"
	"time"
)

// strftime formats t with the C/Python directives chat templates use
// (%d %b %Y and their kin). Unknown directives are copied through, as
// Python's strftime does on glibc.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		b.WriteString(directive(t, format[i]))
	}
	return b.String()
}

func pad(n, width int) string {
	s := strconv.Itoa(n)
	for len(s) < width {
		s = "0" + s
	}
	return s
}

func directive(t time.Time, d byte) string {
	switch d {
	case 'Y':
		return strconv.Itoa(t.Year())
	case 'y':
		return pad(t.Year()%100, 2)
	case 'm':
		return pad(int(t.Month()), 2)
	case 'd':
		return pad(t.Day(), 2)
	case 'e':
		return strings.Repeat(" ", 2-len(strconv.Itoa(t.Day()))) + strconv.Itoa(t.Day())
	case 'b', 'h':
		return t.Month().String()[:3]
	case 'B':
		return t.Month().String()
	case 'a':
		return t.Weekday().String()[:3]
	case 'A':
		return t.Weekday().String()
	case 'H':
		return pad(t.Hour(), 2)
	case 'I':
		return pad((t.Hour()+11)%12+1, 2)
	case 'M':
		return pad(t.Minute(), 2)
	case 'S':
		return pad(t.Second(), 2)
	case 'p':
		if t.Hour() < 12 {
			return "AM"
		}
		return "PM"
	case 'j':
		return pad(t.YearDay(), 3)
	case '%':
		return "%"
	}
	return "%" + string(d)
}
