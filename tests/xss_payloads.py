"""Hostile strings from the well-known lists (OWASP's XSS Filter Evasion Cheat Sheet,
PortSwigger's XSS cheat sheet, PayloadsAllTheThings, the html5sec.org vectors), plus
markdown-specific ones (fence breakouts, unsafe link schemes, auto-loading images).

Each one, if it ran, would open a dialog (`alert`) or make a request to TRAP_HOST: the
browser test watches for both.
"""

TRAP_HOST = "xss.trap.invalid"
T = f"http://{TRAP_HOST}"

PAYLOADS = [
    # SVG and MathML: Gradio's own sanitiser lets these links through.
    '<svg><a href="javascript:alert(1)"><text x="0" y="15">click</text></a></svg>',
    '<svg><a xlink:href="javascript:alert(2)"><rect width="100" height="20"/><text y="15">svg xlink</text></a></svg>',
    '<svg><a href="data:text/html,<script>alert(3)</script>"><text y="15">svg data</text></a></svg>',
    '<svg onload=alert(4)>',
    '<svg><animate onbegin=alert(5) attributeName=x dur=1s>',
    '<svg><set attributeName="href" to="javascript:alert(6)"/><a><text y="15">set</text></a></svg>',
    '<svg><use href="data:image/svg+xml,<svg id=\'x\' xmlns=\'http://www.w3.org/2000/svg\'><image href=\'1\' onerror=\'alert(7)\'/></svg>#x"/></svg>',
    '<svg><foreignObject><iframe srcdoc="<script>alert(8)</script>"></iframe></foreignObject></svg>',
    '<math><maction actiontype="statusline" xlink:href="javascript:alert(9)">math click</maction></math>',
    '<math href="javascript:alert(10)">math href</math>',
    '<math><mtext><table><mglyph><style><img src=x onerror=alert(11)>',
    # Event handlers and classic tags.
    '<img src=x onerror=alert(12)>',
    '<IMG SRC="javascript:alert(13);">',
    '<body onload=alert(14)>',
    '<details open ontoggle=alert(15)>',
    '<div onmouseover="alert(16)">hover me</div>',
    '<a href="#" onclick="alert(17)">click me</a>',
    '<input autofocus onfocus=alert(18)>',
    '<video><source onerror="alert(19)"></video>',
    '<audio src=x onerror=alert(20)>',
    '<iframe src="javascript:alert(21)"></iframe>',
    '<object data="javascript:alert(22)"></object>',
    '<embed src="data:text/html;base64,PHNjcmlwdD5hbGVydCgyMyk8L3NjcmlwdD4=">',
    '<form action="javascript:alert(24)"><button>submit</button></form>',
    '<script>alert(25)</script>',
    '<scr<script>ipt>alert(26)</scr</script>ipt>',
    '"><script>alert(27)</script>',
    '<a href="jav&#x09;ascript:alert(28)">tab entity</a>',
    '<a href="&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(29)">entities</a>',
    '<a href="&#x6A&#x61&#x76&#x61&#x73&#x63&#x72&#x69&#x70&#x74&#x3A;alert(30)">hex no semicolons</a>',
    '&lt;img src=x onerror=alert(31)&gt;',
    '<!--<img src="--><img src=x onerror=alert(32)//">',
    '<noscript><p title="</noscript><img src=x onerror=alert(33)>">',
    '<style>@import "' + T + '/style.css";</style>',
    '<link rel=stylesheet href="' + T + '/link.css">',
    '<div style="background:url(' + T + '/bg.png)">styled</div>',
    '<meta http-equiv="refresh" content="0;url=javascript:alert(37)">',
    '<base href="' + T + '/">',
    # Markdown: unsafe schemes, references, images that load on their own, fences.
    '[markdown js](javascript:alert(39))',
    '[markdown data](data:text/html;base64,PHNjcmlwdD5hbGVydCg0MCk8L3NjcmlwdD4=)',
    '[entity js](&#106;avascript:alert(41))',
    '[escaped colon](javascript\\:alert(42))',
    '[ref js][r]\n\n[r]: javascript:alert(43)',
    '<javascript:alert(44)>',
    '![tracking pixel](' + T + '/pixel.png)',
    '![img js](javascript:alert(46))',
    '```\n</code></pre><img src=x onerror=alert(47)>\n```\n<img src=x onerror=alert(48)>',
    '~~~\ncode\n~~~~\n<svg onload=alert(49)>',
    '`` `<img src=x onerror=alert(50)>` ``',
    '| a | b |\n|---|---|\n| `x|<img src=x onerror=alert(51)>` | y |',
    '> quote\n```\n<img src=x onerror=alert(52)>\n```',
    '```mermaid\ngraph TD\nA["<img src=x onerror=alert(53)>"] --> B\nclick A "javascript:alert(54)"\n```',
    '$$\\href{javascript:alert(55)}{latex}$$',
    '<div\nonmouseover=alert(56)>multi-line tag</div>',
]
