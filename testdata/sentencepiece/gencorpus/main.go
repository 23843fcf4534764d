// Command gencorpus writes the tokenizer conformance corpus: made-up lines
// mixing many scripts, emoji, combining marks, full-width forms, digits and
// irregular whitespace. The output is a pure function of the fixed seed so
// gen.sh is reproducible.
//
// Usage: go run ./gencorpus corpus.txt edge.txt randids.txt random.txt
//
// corpus.txt is used both to train the test models and as test input;
// edge.txt holds extra inputs the models never saw (invalid UTF-8, unseen
// characters, symbol look-alikes) and is only used as test input.
// randids.txt holds random id sequences for the 512-piece tok512
// vocabulary, weighted towards byte pieces, to test decoding. random.txt
// holds lines spliced from corpus fragments and edge-case snippets, test
// input only.
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
)

// Word pools per script. The phrases are invented for this corpus.
var pools = [][]string{
	// English.
	strings.Fields("the a small lantern drifted over quiet harbor while seven gulls argued about bread " +
		"tomorrow morning engineers measured every bridge twice because rivers change their minds " +
		"once upon time little fox found shiny button under old oak tree and decided keep it"),
	// Cyrillic.
	strings.Fields("маленький фонарь плыл над тихой гаванью пока семь чаек спорили о хлебе " +
		"завтра утром инженеры измерили каждый мост дважды потому что реки меняют решения"),
	// Greek.
	strings.Fields("ένα μικρό φανάρι επέπλεε πάνω από το ήσυχο λιμάνι ενώ επτά γλάροι μάλωναν για ψωμί"),
	// Arabic.
	strings.Fields("فانوس صغير طاف فوق الميناء الهادئ بينما تجادلت سبعة نوارس حول الخبز"),
	// Hebrew.
	strings.Fields("פנס קטן צף מעל הנמל השקט בזמן ששבעה שחפים התווכחו על לחם"),
	// Devanagari.
	strings.Fields("एक छोटा दीपक शांत बंदरगाह के ऊपर तैरता रहा जबकि सात पक्षी रोटी पर बहस करते रहे"),
	// Thai (no spaces between words in real text; keep short chunks).
	strings.Fields("โคมไฟ เล็ก ลอย เหนือ ท่าเรือ เงียบ นกนางนวล เจ็ด ตัว"),
	// Chinese.
	strings.Fields("小灯笼 漂浮在 安静的 港口 上空 七只 海鸥 为了 面包 争吵 明天 早上 工程师 测量了 每座 桥"),
	// Japanese.
	strings.Fields("ちいさな ランタンが しずかな みなとの うえを ただよい カモメが パンに ついて けんかした"),
	// Korean.
	strings.Fields("작은 등불이 조용한 항구 위를 떠다니고 갈매기 일곱 마리가 빵을 두고 다퉜다"),
	// Latin with precomposed and combining diacritics.
	strings.Fields("café naïve façade señor Ångström Øresund straße jalapeño cafe\u0301 nai\u0308ve n\u0303o A\u030angstro\u0308m"),
	// Full-width forms and compatibility characters.
	strings.Fields("ＡＢＣ ｈｅｌｌｏ １２３ ＃ｔａｇ ｶﾀｶﾅ ﬁne ﬂow ①② ™ ½ ㎏ Ⅻ"),
	// Emoji, including ZWJ sequences, skin tones, flags and variation selectors.
	strings.Fields("🙂 🚀 🌊🌊 👍🏽 👩\u200d💻 👨\u200d👩\u200d👧\u200d👦 🏳\ufe0f\u200d🌈 ❤\ufe0f 🇯🇵 🇫🇷 ✈\ufe0f 🧑🏿\u200d🚒"),
	// Numbers and punctuation.
	strings.Fields("0 7 42 1999 2024-05-17 3.14159 1,000,000 +49 (555) #17 100% v2.0.1 x86_64 — … « » „ “ ” ¿ ¡"),
}

var spaces = []string{" ", " ", " ", " ", "  ", "   ", "\t", " \t ", "\u3000", "\u00a0"}

func line(r *rand.Rand) string {
	var b strings.Builder
	switch r.IntN(8) {
	case 0:
		b.WriteString(" ")
	case 1:
		b.WriteString("   ")
	case 2:
		b.WriteString("\t")
	}
	n := 1 + r.IntN(14)
	main := r.IntN(len(pools))
	for i := 0; i < n; i++ {
		if i > 0 {
			if r.IntN(6) == 0 {
				b.WriteString(spaces[r.IntN(len(spaces))])
			} else {
				b.WriteString(" ")
			}
		}
		p := pools[main]
		if r.IntN(4) == 0 {
			p = pools[r.IntN(len(pools))]
		}
		w := p[r.IntN(len(p))]
		switch r.IntN(12) {
		case 0:
			w += fmt.Sprint(r.IntN(100000))
		case 1:
			w = strings.ToUpper(w)
		case 2:
			w += "."
		case 3:
			w = "\"" + w + "\","
		}
		b.WriteString(w)
	}
	switch r.IntN(8) {
	case 0:
		b.WriteString(" ")
	case 1:
		b.WriteString("  \t")
	}
	return b.String()
}

// edgeLines are inputs chosen to hit corner cases of the normalizer and the
// encoders; "\xff" style escapes are invalid UTF-8 on purpose.
var edgeLines = []string{
	"",
	" ",
	"      ",
	"\t\t",
	"a",
	" a",
	"a ",
	"▁",
	"▁▁ ▁",
	"hello▁world",
	"<s> </s> <unk> <pad>",
	"<0x41><0xE3>",
	"\xff",
	"abc\xffdef",
	"\xe3\x81",
	"\xe3\x81 tail",
	"\xc0\xaf overlong",
	"\xed\xa0\x80 surrogate",
	"\xf4\x90\x80\x80 beyond",
	"\ufffd replacement",
	"ꙮ unseen ᚠᛇᚻ runes 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
	"𐍈𐌰𐌹 gothic",
	"각 conjoining jamo",
	"e\u0301\u0301\u0301 stacked",
	"zero\u200bwidth\u200cjoiner\u200dx",
	"soft\u00adhyphen",
	"line\u2028sep\u2029par",
	"\u3000ideographic\u3000space\u3000",
	"ｆｕｌｌ\u3000ｗｉｄｔｈ　ＡＢＣ　１２３",
	"𝟎𝟏𝟐 math digits ²³",
	"ﷺ ligature",
	"Ǆ ǅ ǆ digraphs",
	"12345678901234567890",
	"a1b2c3d4",
	"[MASK] [CLS] <sep> <|endoftext|>",
	"😀😃😄😁😆😅🤣😂",
	"🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f tag flag",
	"x\x01y\x1fz control chars",
	"tab\tinside\tand trailing\t",
	strings.Repeat("long ", 200),
	strings.Repeat("日本語テキスト", 40),
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: gencorpus corpus.txt edge.txt randids.txt random.txt")
		os.Exit(2)
	}
	r := rand.New(rand.NewPCG(20250517, 7))
	var corpus strings.Builder
	for i := 0; i < 600; i++ {
		corpus.WriteString(line(r))
		corpus.WriteByte('\n')
	}
	if err := os.WriteFile(os.Args[1], []byte(corpus.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[2], []byte(strings.Join(edgeLines, "\n")+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[3], []byte(randomIDs(r)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[4], []byte(splicedLines(r, corpus.String())), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// snippets are spliced into random lines: whitespace variants, symbols the
// test models define, invalid UTF-8 and characters no model has seen.
var snippets = []string{
	" ", "  ", "\t", "\u3000", "\u00a0", "▁", "\xff", "\xe3\x81", "\u200b", "\u00ad",
	"e\u0301", "ﬁ", "①", "<sep>", "<sep2>", "[MASK]", "🚀", "ab", "ＡＢＣ", "XY", "<s>", "<cls>",
	"0", "123", "\x01", "ꙮ", "😀", "\U0010FFFF", "\uFFFD", "\uFEFF", "\u2028", "▁the",
}

// splicedLines writes 1000 lines, each up to 30 pieces that are either a
// snippet or a run of 1-6 characters from a random place in the corpus.
func splicedLines(r *rand.Rand, corpus string) string {
	runes := []rune(strings.ReplaceAll(corpus, "\n", " "))
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		n := r.IntN(30)
		for j := 0; j < n; j++ {
			if r.IntN(3) == 0 {
				b.WriteString(snippets[r.IntN(len(snippets))])
				continue
			}
			p := r.IntN(len(runes))
			end := min(p+1+r.IntN(6), len(runes))
			b.WriteString(string(runes[p:end]))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// randomIDs writes 1000 lines of up to 24 ids for the tok512 vocabulary:
// 0 <unk>, 1 <s>, 2 </s>, 3..258 the bytes 0x00..0xFF, then merged pieces.
// The bytes 0x0A and 0x0D are left out so every line decodes to one line.
func randomIDs(r *rand.Rand) string {
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		n := r.IntN(25)
		for j := 0; j < n; j++ {
			var id int
			switch k := r.IntN(10); {
			case k < 4:
				id = 3 + 0x80 + r.IntN(0x80) // UTF-8 lead and continuation bytes
			case k < 5:
				id = 3 + r.IntN(0x80)
			case k < 6:
				id = r.IntN(3)
			default:
				id = 259 + r.IntN(512-259)
			}
			if id == 3+0x0A || id == 3+0x0D {
				continue
			}
			if b.Len() > 0 && j > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprint(&b, id)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
