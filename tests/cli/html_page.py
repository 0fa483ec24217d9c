#!/usr/bin/env python3
"""html_page.py PAGE JSON [--min-keys N] [--schedule] [--log FILE] — a --html page says what its JSON says.

A page ptdp writes (include/ptdp/html.h) embeds the command's JSON output
and shows numbers only by key.  Read with the standard library alone (no
browser), the page must hold:

  (a) the data     <script type="application/json" id="ptdp-data"> parses to
                   exactly the JSON file the command wrote (--report, --json)
  (b) the numbers  every element with data-key="a.2.b" has as its text the
                   JSON's ["a"][2]["b"]: a number reading back the same double,
                   or with data-round="N" exactly printf's %.Ng of it (of it
                   divided by S with data-scale="S"); a string
                   as is; true/false/null as JSON spells them
  (c) one file     no <link>, no <script src=…>, no src= or href= at all but
                   "#…" anchors, no url(…) or @import in a style

--min-keys N: at least N data-key elements (a page showing nothing passes
nothing).  --schedule: the drawing has one <g data-mb="k"> per action of
the JSON's "actions", k its micro-batch, stage by stage in order.
--log FILE: <script type="application/json" id="ptdp-log"> holds FILE's
lines (ptdp train --log), one object a line, as one array.

Exits 1 naming the first difference.
"""
import json
import re
import sys
from html.parser import HTMLParser


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.data_text = None        # the ptdp-data script's text
        self.log_text = None         # the ptdp-log script's text
        self.in_data = False
        self.in_log = False
        self.in_style = False
        self.styles = []
        self.keys = []               # (key, round or None, text, scale or None)
        self.open_key = None         # [key, round, [text…], tag]
        self.mbs = []                # data-mb values, in document order
        self.external = []           # what would reach outside the file

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == 'link':
            self.external.append('<link %s>' % a)
        for name in ('src', 'href', 'xlink:href', 'srcset', 'action', 'data'):
            v = a.get(name)
            if v is not None and not v.startswith('#'):
                self.external.append('<%s %s="%s">' % (tag, name, v))
        if tag == 'script':
            if a.get('id') == 'ptdp-log':
                self.in_log = True
                self.log_text = ''
            if a.get('id') == 'ptdp-data':
                if a.get('type') != 'application/json':
                    self.external.append('ptdp-data is not application/json')
                self.in_data = True
                self.data_text = ''
        if tag == 'style':
            self.in_style = True
        if 'data-mb' in a and tag == 'g':
            self.mbs.append(int(a['data-mb']))
        if 'data-key' in a:
            if self.open_key is not None:
                raise SystemExit('html_page: data-key="%s" inside data-key="%s"' % (a['data-key'], self.open_key[0]))
            self.open_key = [a['data-key'], a.get('data-round'), [], tag, a.get('data-scale')]

    def handle_endtag(self, tag):
        if tag == 'script':
            self.in_data = False
            self.in_log = False
        if tag == 'style':
            self.in_style = False
        if self.open_key is not None and tag == self.open_key[3]:   # a value holds no markup
            k = self.open_key
            self.keys.append((k[0], k[1], ''.join(k[2]), k[4]))
            self.open_key = None

    def handle_data(self, data):
        if self.in_data:
            self.data_text += data
        if self.in_log:
            self.log_text += data
        if self.in_style:
            self.styles.append(data)
        if self.open_key is not None:
            self.open_key[2].append(data)


def fail(msg):
    print('html_page: ' + msg)
    sys.exit(1)


def lookup(data, key):
    v = data
    for part in key.split('.'):
        if isinstance(v, list):
            if not part.isdigit() or int(part) >= len(v):
                fail('data-key="%s": no element %s in a list of %d' % (key, part, len(v)))
            v = v[int(part)]
        elif isinstance(v, dict):
            if part not in v:
                fail('data-key="%s": the JSON has no "%s" here (it has %s)' % (key, part, sorted(v)[:12]))
            v = v[part]
        else:
            fail('data-key="%s": "%s" is below a %s' % (key, part, type(v).__name__))
    return v


def same(key, rnd, text, value, scale):
    if isinstance(value, bool):
        return text == ('true' if value else 'false')
    if value is None:
        return text == 'null'
    if isinstance(value, str):
        return text == value
    if isinstance(value, (int, float)):
        if scale is not None:
            if rnd is None:
                fail('data-key="%s": data-scale without data-round' % key)
            return text == '%.*g' % (int(rnd), float(value) / float(scale))
        if rnd is not None:
            return text == '%.*g' % (int(rnd), value)
        try:
            return float(text) == float(value)
        except ValueError:
            return False
    fail('data-key="%s" names a %s, not a value' % (key, type(value).__name__))
    return False


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    page_path, json_path = args[0], args[1]
    min_keys = int(args[args.index('--min-keys') + 1]) if '--min-keys' in args else 1
    with open(page_path, encoding='utf-8') as f:
        text = f.read()
    with open(json_path, encoding='utf-8') as f:
        expected = json.load(f)
    p = Page()
    p.feed(text)
    p.close()

    if p.data_text is None:
        fail('no <script type="application/json" id="ptdp-data">')
    try:
        embedded = json.loads(p.data_text)
    except ValueError as e:
        fail('(a) the embedded data is not JSON: %s' % e)
    if embedded != expected:
        for k in expected if isinstance(expected, dict) else []:
            if embedded.get(k) != expected[k]:
                fail('(a) the embedded JSON differs from %s at "%s"' % (json_path, k))
        fail('(a) the embedded JSON differs from %s' % json_path)
    if len(p.keys) < min_keys:
        fail('(b) %d data-key elements, expected at least %d' % (len(p.keys), min_keys))
    for key, rnd, shown, scale in p.keys:
        value = lookup(expected, key)
        if not same(key, rnd, shown, value, scale):
            fail('(b) data-key="%s" shows %r but the JSON holds %r%s%s' %
                 (key, shown, value, ' (data-round=%s)' % rnd if rnd else '',
                  ' (data-scale=%s)' % scale if scale else ''))
    if p.external:
        fail('(c) reaches outside the file: %s' % p.external[0])
    for s in p.styles:
        if re.search(r'url\(|@import', s):
            fail('(c) a style loads another file: %s' % s[:80])
    if '--schedule' in args:
        want = [a['mb'] for stage in expected['actions'] for a in stage]
        if p.mbs != want:
            fail('the drawing\'s data-mb boxes %s… differ from the actions\' micro-batches %s…' %
                 (p.mbs[:12], want[:12]))
    if '--log' in args:
        log_path = args[args.index('--log') + 1]
        with open(log_path, encoding='utf-8') as f:
            lines = [json.loads(line) for line in f if line.strip()]
        if p.log_text is None:
            fail('no <script type="application/json" id="ptdp-log">')
        if json.loads(p.log_text) != lines:
            fail('the embedded log differs from the %d lines of %s' % (len(lines), log_path))
        print('html_page: the embedded log equals the %d lines of %s' % (len(lines), log_path))
    print('html_page: %s: the data equals %s, %d numbers by key agree, no external reference' %
          (page_path, json_path, len(p.keys)))


if __name__ == '__main__':
    main()
