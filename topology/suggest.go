package topology

// suggest returns the candidate closest to word when it is close enough to
// be a likely typo (edit distance at most 2, and less than half the word),
// else "".
func suggest(word string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		d := editDistance(word, c)
		if d < bestDist && 2*d < len(c) {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
// Inputs longer than 64 bytes are not compared (the distance is large).
func editDistance(a, b string) int {
	const limit = 64
	if len(a) > limit || len(b) > limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
