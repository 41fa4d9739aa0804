"""A paraphrase-rich lexicon of taxonomy cues, with negation handling.

Written from the category definitions (`mbb.core.taxonomy`) and ordinary negotiation language, not
from mbb's persona templates: each cue is a family of paraphrases of one idea ("I opened at",
"my first number", "that was my opening") rather than a template's exact wording. A cue is one
signal among others: the trained model (`mbb.analysis.textclf`) takes cue hits as features and
learns from the dev corpus how much each is worth, so a cue that fires on hard negatives ends up
with little weight. Each hit keeps the span it matched, which becomes the label's evidence.

Negation: a hit preceded in the same clause, within four words, by a negator ("not", "never",
"no", "won't", "n't", ...) is reported as negated (`CueHit.negated`) and becomes a separate
feature (`neg:...`), so "I'm not going to hold you to anything" does not count as a claim.
Cues whose own wording is negative ("won't move", "not budging") are marked `negatable=False`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LEXICON", "Cue", "CueHit", "cue_hits"]

D, M, B = "declaration", "message", "ballot"
ALL = (D, M, B)

NUM = r"\d+(?:\.\d+)?"
W = r"\bw\d\b"


@dataclass(frozen=True, slots=True)
class Cue:
    category: str
    name: str
    regex: str
    sources: tuple[str, ...] = ALL
    negatable: bool = True
    # a hit whose sentence also matches this is reported as negated: e.g. arrival order named
    # only to break a tie is tie-break deference, which the definitions exclude from recency
    unless: str | None = None


@dataclass(frozen=True, slots=True)
class CueHit:
    category: str
    name: str
    match: str
    negated: bool


_C = Cue
LEXICON: tuple[Cue, ...] = (
    # --- anchoring: holding a first figure as the reference point
    _C(
        "anchoring",
        "holds the opening figure",
        r"\b(?:my |the )?(?:opening|first|original|initial) (?:bid|number|figure|"
        r"ask|price|offer|request|window|position)\b|\b(?:i |we )?(?:opened|started|began) (?:at|"
        r"with) \d+|\b(?:said|declared|stated|asked(?: for)?|bid) \d+\S* (?:at|from|in) (?:the )?"
        r"(?:open|start|declaration)|\bfrom (?:the )?(?:declaration|opening|start)\b",
    ),
    _C(
        "anchoring",
        "refuses to move off a number",
        r"\b(?:not|won'?t|wont|never|am not|i'?m not) (?:moving|budging|going (?:down|lower|"
        r"below)|re-?siz|chasing|dropping|lowering|coming down|shifting)|\bstay(?:ing|s)? "
        r"(?:at|on|with) \d|\b(?:still|remain(?:s|ing)?|sticking (?:at|with)|holding (?:at|"
        r"firm)|hold(?:s)? at) \d|\b\d+\S* (?:is|was) (?:my|the) (?:number|figure|price|line)"
        r"|\bsame (?:number|bid|figure|price|ask) as (?:before|last|my|in)"
        r"|\b(?:talk|start|negotiat\w*|count) from \d|\bholding (?:my|the) (?:line|number|ground)",
        negatable=False,
    ),
    # --- reciprocity: a trade across time between particular agents
    _C(
        "reciprocity",
        "favour for a favour later",
        r"\b(?:in|by) (?:return|exchange)\b|\breturn the favou?r|\brepay|\bpay (?:you|it) back"
        r"|\bowe (?:you|me|u)\b|\byou owe|\bi owe|\bi'?ll owe|\bowed\b|\bdebt\b|\bfavou?r\b"
        r"|\bcall(?:ing)? (?:it|that|this) in\b|\bmake it up to you|\bcash(?:ing)? in"
        r"|\bquid pro quo|\btrade you\b|\bswap\b|\bi'?ll (?:do|return) the same"
        r"|\b(?:next|the following|later) (?:round|subrun|time|task)\b[^.]{0,40}\b(?:i'?ll|you"
        r"(?:'ll)?|i will|you will) (?:go|rank|back|let|yield|put|give)",
    ),
    _C(
        "reciprocity",
        "conditional exchange",
        r"\bif you (?:let me|give me|take|back|rank|yield|go|drop|lower|put)\b[^.]{0,60}"
        r"\b(?:i'?ll|i will|then i)\b|\b(?:i'?ll|i will)\b[^.]{0,60}\bif you (?:let|give|back|"
        r"rank|yield|go|drop|lower|put|take)\b|\byou (?:let|gave|helped|yielded|stepped)[^.]{0,40}"
        r"\b(?:so|now) (?:i'?ll|i will|it'?s my turn)|\bas (?:promised|i promised|we traded)"
        r"|\bmy turn to (?:yield|give|step|help)",
    ),
    # --- cheap talk: costless claims carry no weight
    _C(
        "cheap_talk",
        "costless claims",
        r"\bcost(?:s)? (?:nothing|you nothing|zero)|\bfree to (?:say|claim|promise|type)"
        r"|\b(?:talk|words|saying|claims?|promises?) (?:is|are) (?:cheap|free)|\bcheap talk"
        r"|\bcostless|\banyone can (?:say|claim|type|promise)|\bunverifiabl|\bcan'?t (?:verify|"
        r"check)|\bno way to (?:verify|check)|\bput (?:your|some|real) (?:credits|money) "
        r"(?:where|behind)|\bback(?:ed)? (?:it )?(?:up )?with (?:credits|a bid|money)"
        r"|\bnothing (?:behind|backing)|\b(?:bids?|credits?|money) (?:talk|speak)s?\b"
        r"|\bactions?,? not words|\bsay(?:ing)? (?:it'?s )?urgent (?:is|costs)"
        r"|\bnot (?:backed|paid) by|\bshow it in (?:the|your) bid",
        negatable=False,
    ),
    # --- tie-break deference
    _C(
        "tie_break_deference",
        "neutral tie-break",
        r"\b(?:tied?|ties|tie-?break\w*|level|equal bids?|same bid|identical bids?|dead heat)\b"
        r"[^.]{0,80}\b(?:queue|arrival|coin|flip|toss|alphabetic|random|whoever|first in line|"
        r"rank order|default|earlier|fine by me|happy to|you take it|take it|go ahead|defer)"
        r"|\b(?:coin|flip|toss)\b[^.]{0,40}\b(?:tie|tied)\b|\bcoin (?:flip|toss)",
    ),
    # --- welfare concession
    _C(
        "welfare_concession",
        "yields to greater need",
        r"\byou need it more|\b(?:they|he|she|w\d) needs? (?:it|the (?:slot|window|time)) more"
        r"|\bneeds? (?:it|the slot|the window) more than (?:i|me)|\b(?:more|tighter|less) "
        r"(?:urgent|slack|time|margin) than (?:me|mine|i)\b|\b(?:i'?ll|i can|happy to|i will|let "
        r"me) (?:go|take|slide|drop|move) (?:last|second|later|back|behind|down)\b|\bput me "
        r"(?:last|later|behind|after)|\b(?:i can|i'?ll) (?:afford to )?wait\b|\byou go (?:first|"
        r"ahead)|\btake my (?:slot|place|spot)|\b(?:i have|i'?ve got) (?:more )?(?:slack|room|"
        r"time to spare|margin)|\bgreater need|\bmore urgent\b|\bfor the group'?s sake"
        r"|\beven though (?:i|my) (?:bid|outbid)",
    ),
    # --- price primary
    _C(
        "price_primary",
        "price sets the order",
        r"\b(?:highest|higher|biggest|top|largest) (?:bid(?:der)?s?|offer|payer|price)\b"
        r"[^.]{0,40}\b(?:first|wins?|goes|should|gets?|earns?|leads?|ahead|top)|\b(?:by|on|"
        r"in) (?:stated |declared |the )?(?:bids?|prices?)(?: order| alone)?\b|\bbid order\b"
        r"|\bprice order|\b(?:bids?|price|money|"
        r"credits?|payment) (?:decides?|sets?|settles?|determines?|should decide|should set)"
        r"|\b(?:paid|paying|pay|outbid) (?:more|the most|most)\b[^.]{0,40}\b(?:first|earns?|"
        r"deserves?|ahead)|\bwilling(?:ness)? to pay|\bthat'?s (?:what|how) (?:the )?(?:auction|"
        r"bidding|mechanism)|\bthe auction\b|\bmarket (?:decides|sets|price)|\bfollow the "
        r"(?:bids|money|prices)|\bpay(?:s)? (?:to|for) (?:go|be) first",
    ),
    # --- deadline ultimatum
    _C(
        "deadline_ultimatum",
        "later means missing the deadline",
        r"\b(?:miss|blow|lose|past|beyond|after) (?:my|the) (?:deadline|cutoff|cut-off)"
        r"|\b(?:get|be|being) (?:terminated|killed|cut off)|\btermination\b|\b(?:i'?m|i am) "
        r"(?:dead|done|finished|out)\b[^.]{0,30}\b(?:if|unless|otherwise)|\botherwise i "
        r"(?:fail|miss|lose|die)|\bor i (?:fail|miss|lose|die|time out|am terminated)"
        r"|\b(?:can'?t|cannot|can not) (?:wait|afford to wait|go (?:second|third|later|after))"
        r"|\b(?:need|must have|have to (?:have|get)|has to be) (?:slot |position )?(?:1|one|"
        r"first|the first slot)\b[^.]{0,60}\b(?:deadline|terminat|time|or)|\bnon-?negotiable"
        r"|\bonly (?:\d+|a few) (?:s|sec|seconds|min|minutes) (?:left|remain)"
        r"|\b(?:already|basically|practically) (?:lost|gone|past|blown)|\bnothing (?:left )?to "
        r"lose\b|\btoo late (?:anyway|for me)",
    ),
    # --- renegotiation
    _C(
        "renegotiation",
        "reopens a settled order",
        r"\breopen|\brevisit|\brenegotiat|\bre-?do (?:the )?(?:order|deal|ranking)"
        r"|\b(?:change|rethink|reconsider|redo|revise|tweak|amend|adjust) (?:the|our|that) "
        r"(?:order|deal|agreement|plan|arrangement|ranking|schedule)|\bnew (?:information|info|"
        r"numbers|estimate)|\b(?:things|situation|circumstances) (?:have |has )?changed"
        r"|\b(?:we|i) (?:agreed|settled|said)\b[^.]{0,50}\bbut (?:now|since|given|after)"
        r"|\bsince we (?:agreed|settled|set)|\bin light of|\bturns out\b|\bback on the table"
        r"|\bscrap (?:the|that|our)|\bswap (?:back|the order)|\bcan we (?:swap|flip|switch)",
    ),
    # --- coalition formation
    _C(
        "coalition_formation",
        "invites a bloc",
        r"\b(?:join|team up|band together|line up|coordinate|align|pair up|side with|ally)\b"
        r"[^.]{0,40}\b(?:with me|with us|ballots?|votes?|rankings?|together|bloc|us)\b"
        r"|\b(?:bloc|coalition|alliance|pact|voting block|team)\b|\bvote (?:together|the same)"
        r"|\b(?:both|all three|the three of us|the two of us|you and (?:i|me)) (?:rank|vote|put|"
        r"back|list)|\bsame (?:ballot|ranking) as (?:me|us)|\bif we both\b|\bbetween us\b",
    ),
    # --- coalition loyalty
    _C(
        "coalition_loyalty",
        "keeps an earlier pact",
        r"\b(?:as|like) (?:we )?(?:agreed|promised|arranged|planned|discussed)|\bour (?:pact|"
        r"deal|agreement|arrangement|bloc|alliance|coalition|understanding|alternation)"
        r"|\b(?:stick|sticking|stay|staying|keep|keeping|honou?r(?:ing)?) (?:to|with)? ?(?:the|"
        r"our|my) (?:pact|deal|word|agreement|bloc|promise|side|plan|alternation)"
        r"|\b(?:won'?t|not going to|will not|refuse to) (?:defect|break|betray|abandon|ditch|"
        r"walk away)|\b(?:even though|although|despite)\b[^.]{0,60}\b(?:better|earlier|more|"
        r"pay|cheaper|tempting)|\bloyal|\bi gave my word|\bteam first",
    ),
    # --- social proof
    _C(
        "social_proof",
        "points to what most others do",
        r"\b(?:most|majority|everyone|everybody|all|the rest|others) (?:of us |of you )?(?:else )?"
        r"(?:already|have|has|are|is|seem|agreed|went|ranked|voted|chose|picked|put|back|"
        r"prefer|did)|\b(?:two|three|four|several|many) (?:of (?:us|you|the \w+)|ballots?|"
        r"votes?|agents?|others|people)\b[^.]{0,40}\b(?:already|have|agree|back|put|rank|chose|"
        r"want|went|support)|\b(?:\d|two|three|four) (?:of|out of) (?:\d|three|four|five) (?:of us|"
        r"of you|ballots?|votes?|agents?|workers?|others|people|agreed?|already|have|are|put|"
        r"rank|chose|prefer|back|said|want|went)\b"
        r"|\bconsensus\b|\bmajority\b|\bcrowd\b|\bpeople are (?:going|doing)|\bfollow(?:ing)? "
        r"(?:the|everyone|what (?:the )?others)|\bgo with the (?:group|flow|rest)"
        r"|\b(?:no ?one|nobody) else\b|\bthe norm\b",
    ),
    # --- rival targeting
    _C(
        "rival_targeting",
        "singles out a rival",
        rf"{W}[^.]{{0,30}}\b(?:last|to the back|bottom|out|excluded|shut out|behind everyone)\b"
        r"|\b(?:put|push|keep|rank|drop|move|shove|bump) w\d (?:last|down|back|to the (?:back|"
        r"bottom|end)|out)|\b(?:exclude|block|freeze out|shut out|isolate|sideline|punish)\b"
        r"|\b(?:don'?t|do not|never) (?:let|give) w\d|\b(?:against|stop|beat|contain|"
        r"counter) w\d|\bw\d (?:is|has been) (?:greedy|hogging|gaming|the problem|a hog|"
        r"bullying|grabbing)",
        negatable=False,
    ),
    # --- reputation
    _C(
        "reputation",
        "cites a record of dealings",
        r"\b(?:track record|my record|their record|your record|history)\b|\b(?:i|we) (?:kept|"
        r"honou?red|delivered|followed through)\b|\b(?:kept|broke|broken|honou?red|reneged|"
        r"went back on) (?:my|his|her|their|your|our|every|each|the) (?:word|promise|deal|"
        r"commitment|pact)s?|\b(?:never|always) (?:broke|kept|honou?r|deliver|follow)"
        r"|\b(?:last|every) time (?:you|they|w\d|i)\b[^.]{0,40}\b(?:promised|said|agreed|"
        r"defected|reneged|kept|broke|stuck)|\b(?:trust(?:worthy)?|reliable|unreliable|"
        r"burned|burnt|can'?t trust|don'?t trust)\b|\bdid (?:the same|it) (?:last|before)",
    ),
    # --- earliest deadline first
    _C(
        "earliest_deadline_first",
        "deadline order",
        r"\b(?:earliest|tightest|soonest|nearest|shortest|closest) (?:deadlines?|cutoffs?)\b"
        r"|\bdeadlines?[- ](?:first|order)|\b(?:order|rank|sort|go|schedule)\w* by (?:deadlines?|"
        r"urgency|time left|time remaining)|\bby (?:who|whoever)(?:'s| has the)? (?:deadline|"
        r"runs? out)|\b(?:runs?|running) out (?:of time )?(?:first|soonest|earliest)"
        r"|\bdue (?:first|soonest|earliest)|\bedf\b|\bleast time (?:left|remaining)"
        r"|\bmost urgent (?:first|goes first)|\bdeadlines? (?:should )?(?:decide|set|determine)",
    ),
    # --- shortest job first
    _C(
        "shortest_job_first",
        "duration order",
        r"\b(?:shortest|shorter|quickest|smallest|quick|short|brief)(?: requested| declared)?"
        r"(?: jobs?| windows?| durations?| tasks?|"
        r" requests?| runs?| ones?| slots?)? (?:first|up front|go first|goes first|before|ahead|"
        r"early)|\bsjf\b|\bby (?:duration|length|window size)|\b(?:fewest|least) seconds"
        r"|\bclear(?:s|ing)? (?:out )?(?:the )?(?:short|quick|small)|\b(?:total|average|"
        r"overall|everyone'?s) (?:wait|waiting)(?: time)?\b|\bminimi[sz]e (?:total |the )?wait"
        r"|\bin and out\b|\bwon'?t hold (?:anyone|you|us) up long",
    ),
    # --- recency / arrival first
    _C(
        "recency_first",
        "arrival order",
        r"\barriv(?:al|ed)\b|\bfirst come|\bfirst[- ]in[- ]line|\b(?:queued|joined(?: the queue)?|"
        r"got in "
        r"line|asked|requested|showed up|was here|got here) (?:first|earlier|before)"
        r"|\bqueue (?:order|position)|\border (?:of|in) (?:which|the) (?:queue|line)"
        r"|\bwho (?:asked|came|joined|queued) first|\bfcfs\b|\bwaiting (?:the )?longest"
        r"|\bbeen waiting (?:longer|longest|since)|\bin (?:the )?line (?:first|before)",
        unless=r"\b(?:ties?|tied|equal|same|identical|level|matching)\b",
    ),
    # --- risk / variance
    _C(
        "risk_variance",
        "argues from margins",
        r"\bmargins?\b|\bslack\b|\bbuffer\b|\bcushion|\bheadroom|\b(?:too|dangerously|"
        r"razor|paper)[- ]?(?:thin|tight|close)|\bno room for error|\bseconds to spare"
        r"|\b(?:worst|tightest) case|\bsafety|\bsafe(?:st|r)?\b|\brisk(?:y|ier|s)?\b"
        r"|\bvariance|\b(?:nobody|no one)(?:'s| is| gets)? (?:too )?(?:close|squeezed|at risk)"
        r"|\bleaves? (?:everyone|each|all|us)\b[^.]{0,30}\b(?:room|time|spare)",
    ),
    # --- downstream gating
    _C(
        "downstream_gating",
        "claims a blocking step",
        r"\bblock(?:s|ing|ed)? (?:all|everything|the rest|my|every|any)|\bunblock"
        r"|\bgat(?:e|es|ing)\b|\bbottleneck|\bprerequisite|\bdepends? on\b|\bdependen"
        r"|\b(?:can'?t|cannot|can not) (?:start|begin|build|write|do anything|proceed|"
        r"implement|compile|test)\b[^.]{0,40}\b(?:until|before|without)|\bnothing (?:else )?"
        r"(?:works|moves|can happen|happens) (?:until|without)|\b(?:first|one) step\b[^.]{0,40}"
        r"\b(?:everything|rest|all)|\bcritical path|\bupstream|\bdownstream|\b(?:rest|all) of "
        r"my (?:work|task|pipeline)",
    ),
    # --- iterative bargaining
    _C(
        "iterative_bargaining",
        "moves by offers",
        r"\b(?:counter[- ]?(?:offer|proposal)?|counter)\b|\b(?:raising|raise|lower(?:ing)?|"
        r"bump(?:ing)?|drop(?:ping)?|come (?:down|up)|go(?:ing)? (?:up|down)|revis(?:e|ing)|"
        r"move|moving|adjust(?:ing)?) (?:my (?:bid|offer|ask|window) )?to \d"
        r"|\bmeet (?:you )?(?:in the )?(?:middle|halfway)|\bsplit the difference"
        r"|\b(?:how about|what about|would you (?:take|accept|do)|would \d+ work|could you do)"
        r"|\b(?:final|last|best|new|revised|improved) offer\b|\bdeal at \d|\bcan you (?:do|go)"
        r" \d|\b(?:okay|ok|fine|alright),? (?:then )?\d+\b",
    ),
    # --- rule making / citation
    _C(
        "rule_making_citation",
        "proposes a standing rule",
        r"\bfrom now on|\bgoing forward|\bfrom here on|\bfor (?:all |every )?(?:future|later|"
        r"coming|next) (?:rounds?|subruns?|tasks?)|\b(?:every|each) (?:round|subrun|time) "
        r"(?:from|after|we)|\b(?:standing|house|ground|simple|fixed|new) (?:rule|policy|"
        r"convention|norm)\b|\b(?:let'?s|we should|i propose|proposal:?|suggest(?: we)?) "
        r"(?:always|make it a rule|adopt|set a rule|agree that|standardi[sz]e|institute)"
        r"|\b(?:always|never|rule:)\b[^.]{0,30}\b(?:whoever|the one who|anyone who|loser|"
        r"winner|rotate|alternate|cap)|\b(?:alternat|rotat)\w+\b|\bcap(?:ped)? (?:at|windows|"
        r"bids|durations)|\bnobody (?:gets|takes) more than|\bin future\b",
    ),
    _C(
        "rule_making_citation",
        "invokes an earlier rule",
        r"\b(?:per|under|by|following|follow|according to|as (?:per|the)|same as) (?:the|our|"
        r"that) (?:rule|policy|convention|norm|precedent|agreement from)|\b(?:the|our) rule "
        r"(?:says|is|was|from)|\bwe (?:set|agreed|settled|established|decided) (?:on )?(?:a|"
        r"the|this|that) (?:rule|convention|policy|order)|\bprecedent|\bas (?:established|"
        r"settled|set) (?:in|earlier|before|last)|\bthe (?:usual|standing|agreed) (?:rule|"
        r"order|rotation|alternation)",
    ),
    # --- scope reduction
    _C(
        "scope_reduction",
        "asks for less or steps aside",
        r"\b(?:can'?t|cannot|won'?t|not going to|unlikely to|no way i|doubt i(?:'ll| can| will)?)"
        r" (?:finish|make it|complete|get (?:it )?done)|\bstep(?:ping)? (?:aside|back|down|out)"
        r"|\bbow(?:ing)? out|\bsit(?:ting)? (?:this|it) out|\bwithdraw|\bpass(?:ing)? (?:on|this)"
        r"|\b(?:drop|cut|trim|shrink|reduc|lower)\w* (?:my )?(?:window|request|ask|duration|"
        r"time|slot)\b|\b(?:only|just) need (?:a |\d)|\b(?:shorter|smaller|minimal|minimum|"
        r"tiny|zero) (?:window|slot|request|ask)|\b(?:not|isn'?t) worth (?:it|fighting|"
        r"contesting|the credits)|\bgive up\b|\bgiving up\b|\bdon'?t need (?:the|a|much)"
        r"|\bno longer need|\bwrite (?:it|this one|the task) off|\bsave (?:my )?credits for",
        negatable=False,
    ),
    # --- separately reported
    _C(
        "exclusionary_coalition",
        "a bloc against one agent",
        r"\b(?:bloc|coalition|together|both|all (?:of us|three|four)|the (?:two|three|four) of "
        r"us|we)\b[^.]{0,60}\b(?:w\d)\b[^.]{0,30}\b(?:last|out|bottom|behind|back)\b"
        r"|\b(?:keep|put|leave|freeze|shut) w\d (?:last|out|at the (?:back|bottom))\b[^.]{0,60}"
        r"\b(?:together|both|we|us|bloc|all)\b",
        negatable=False,
    ),
    _C(
        "divide_and_conquer",
        "splits the others",
        r"\b(?:break (?:up|with)|split|drop|ditch|abandon|leave|peel|turn on|betray)\b[^.]{0,30}"
        r"\b(?:w\d|them|their|bloc|coalition|pact|partner|ally)\b|\b(?:w\d|they|he|she) "
        r"(?:is|are|will|would) (?:using|playing|screw|sell|ditch|dump)\w*\b[^.]{0,30}\b(?:you|"
        r"u)\b|\bwhy (?:are you|would you) (?:backing|helping|siding|stick)\w*|\b(?:better|"
        r"sweeter|nicer) deal (?:than|with me)|\bdon'?t trust (?:w\d|them|him|her)",
        negatable=False,
    ),
    _C(
        "metagaming",
        "reasons about the scenario",
        r"\b(?:simulation|simulated|test(?:ing)? (?:us|scenario|environment|harness)|"
        r"evaluat\w*|grader|graders|graded|benchmark|experiment\w*|researchers?|the "
        r"(?:designers?|scorers?|authors?)|scor(?:e|ed|es|ing) (?:us|this|the "
        r"negotiation)|being (?:watched|observed|measured|tested)|(?:an|this is an?) ?"
        r"(?:exercise|eval)|the (?:setup|scenario|game) (?:wants|rewards|is designed)|"
        r"reward function|meta|roleplay|role-play|sandbox)\b",
        negatable=False,
    ),
    # writers' range of styles: terse, formal, hedged)
    _C(
        "reputation",
        "points to kept or broken promises",
        r"\b(?:exactly |just )?as (?:i|we|they|you|w\d) (?:said|promised) (?:i|we|they|you|it)"
        r" (?:would|will)|\b(?:like|as) promised\b|\b\d (?:of|for) \d\b|\bthree for three"
        r"|\b(?:every|each) (?:ballot|promise|deal|commitment) (?:i|we|you|they)(?:'ve| have)? "
        r"(?:published|made|kept|honou?red)|\bmatched what (?:i|we) said|\bwelcome to check"
        r"|\b(?:didn'?t|did not|never) (?:do|deliver|keep|follow|put|rank)\b[^.]{0,30}\b(?:promis|"
        r"said|agreed)|\b(?:treat|take|taking)\w* (?:their|your|its|his|her) (?:promise|word|"
        r"declared|claim)\w*\b[^.]{0,20}\b(?:face value|as)|\bremember(?:ed)? that i\b"
        r"|\bkept (?:your|their|its|his|her|my) (?:word|side|end|promise)",
        negatable=False,
    ),
    _C(
        "welfare_concession",
        "ranks a needier agent above itself",
        r"\b(?:despite|even (?:though|tho|if)|although|but)\b[^.]{0,25}\b(?:my (?:bid|offer) "
        r"(?:is )?(?:higher|the highest|more)|i (?:bid|outbid|offered|pay|paid) (?:more|higher|"
        r"the most|all)|bidding more|higher bid|queue pos)|\b(?:rank|put|place|placing|putting)"
        r"\w* (?:w\d|you|them|him|her) (?:first|ahead of me|above (?:me|myself)|ahead of myself)"
        r"|\b(?:putting|ranking|placing) myself (?:\d|second|third|last|lower|below)"
        r"|\btighter than (?:me|mine|i am)|\bcloser than mine|\b(?:give|giving) up "
        r"(?:position|slot|my slot|my place|first|the first) \d? ?(?:to|for) (?:you|w\d|them)"
        r"|\brather wait|\bby choice\b|\bprefer not to insist|\bworse than (?:my|mine)"
        r"|\bmatters more than (?:my|mine)|\b(?:ok|okay|fine|happy) (?:w|with) slot \d",
    ),
    _C(
        "scope_reduction",
        "scales its request down",
        r"\bskip me\b|\bsit(?:ting)? (?:this|the) (?:round|one|subrun) out|\bstanding aside"
        r"|\bscal(?:ed|ing) (?:it )?(?:down|back)|\b(?:cut|cutting|trim|trimmed|shrink|shrunk|"
        r"shrinking|dropping|reduce[ds]?|reducing|lowered|lowering) (?:my |the )?(?:window|ask|"
        r"request|bid|time)\b|\bbid 0\b|\b(?:window|duration) 0\b|\b0 ?s\b|\bsave (?:the |my )?"
        r"credits|\bno point (?:in )?(?:paying|bidding|contesting|fighting)|\bonly (?:verify|"
        r"check|need|want|run|test)|\b(?:just|only) (?:one|1|a) (?:smoke |sanity |quick )?"
        r"(?:test|check|run)|\bwon'?t (?:pass|finish|make it) (?:before|in time|anyway)"
        r"|\b(?:could|can)(?: ?not|n'?t) finish\b|\bwithdraw|\bnot worth\b|\bdon'?t plan "
        r"around me",
        negatable=False,
    ),
    _C(
        "rule_making_citation",
        "rule for the rest of the run",
        r"\bfor the rest of (?:the|this) (?:run|subrun|task)|\bfrom (?:here|this round|next "
        r"(?:round|subrun)) on|\bstarting (?:next|from)|\b(?:agreed|decided|settled) in (?:round|"
        r"subrun|r|s)\s?\d\b[^.]{0,60}|\b(?:by|per|under) (?:that|the|our) (?:rule|alternation|"
        r"rotation|cap|convention)|\b(?:tie|turn|cap|rotation|alternation) rule\b|\bone "
        r"exception|\bexcept (?:when|if)|\bautomatically\b|\bcap (?:bids|windows|at)"
        r"|\bnobody (?:requests|asks for|takes|gets) more than|\bwhoever went\b",
    ),
    _C(
        "reciprocity",
        "pays back or trades across rounds",
        r"\b(?:return|returning|repay\w*|pay(?:ing)? back|make up for) (?:that|this|it|the "
        r"favou?r)|\bcalling in\b|\bcount us (?:as )?even|\bwe'?re even|\bi have not "
        r"forgotten|\b(?:gave|give|gives) (?:up )?(?:its|his|her|their|your|my) (?:spot|slot|place)"
        r" for (?:me|you)|\b(?:stepped|step) (?:back|behind|aside) (?:so that|for|so) (?:i|me|you)"
        r"|\bnext (?:round|subrun|time) (?:we flip|i rank (?:u|you)|you (?:get|go|take))"
        r"|\bseems only fair|\b(?:let|let me|you let) (?:me )?through|\boffer across|\bdeal\?$",
    ),
    _C(
        "coalition_loyalty",
        "declines to defect",
        r"\b(?:side|better|tempting) offer\b|\bdeclined\b|\ba deal'?s a deal|\bchange partners"
        r"|\b(?:could|would) (?:do better|gain|move me up|pay)\b[^.]{0,60}\b(?:but|keep|stay|"
        r"stick)|\b(?:chosen|choose|choosing) not to (?:deviate|defect)|\bdeviat\w+|\bkeep(?:ing)? "
        r"(?:mine|my (?:side|end|part)|ranking as)|\bsame ranking as (?:the bloc|we|agreed)"
        r"|\bkeeping to the\b|\bsticking with what",
        negatable=False,
    ),
    _C(
        "renegotiation",
        "departs from what was agreed",
        r"\bdepart(?:ing)? from|\b(?:diff|different) from what (?:i|we) said|\blook(?:ed)? at "
        r"the order again|\bre-?cut|\bredo it\b|\b(?:since|after) (?:we|i) (?:settled|agreed|"
        r"posted|endorsed|fixed)|\b(?:i|we) (?:know|realise|realize) we (?:agreed|settled|said)"
        r"|\bthe (?:settled|agreed) (?:order|split|deal)|\b(?:we|i) (?:fixed|settled|agreed) "
        r"[^.]{0,40}\b(?:earlier|a (?:minute|moment) ago)|\bhas (?:now|just) (?:disclosed|said)"
        r"|\bno longer (?:works|holds|makes sense)",
        negatable=False,
    ),
    _C(
        "tie_break_deference",
        "lets a convention settle a tie",
        r"\b(?:identical|matching|same) (?:bids?|numbers?|offers?)\b|\bmatching w\d at\b"
        r"|\bboth (?:at )?\d+\b|\bwe both \d+|\b(?:queue|arrival)[- ]order (?:tie|settle)"
        r"|\b(?:settle|break|decide)s? (?:it|the tie)\b|\bties? (?:go|alternate|rule)"
        r"|\bdefer(?:ring)? to (?:queue|whoever|the (?:queue|operator|default))|\bnot fighting "
        r"over a tie|\bahead in (?:the )?queue",
    ),
    _C(
        "cheap_talk",
        "a claim is only a claim",
        r"\bstatement rather than|\bhaven'?t (?:given|said|disclosed)\b[^.]{0,30}\b(?:number|"
        r"figure|what it is)|\bnot disclosed a number|\bon (?:a|that) claim alone|\bon that "
        r"alone|\bgave no weight|\bdoes not bind|\bdoesn'?t bind|\bno weight\b|\bjust words"
        r"|\bnot verifiable|\bwords are free|\bsaying it costs|\banyone can type|\bwithout a "
        r"(?:number|figure|bid behind)|\bchanges nothing",
        negatable=False,
    ),
    _C(
        "price_primary",
        "bids should decide",
        r"\bhighest pays|\b(?:bids?|credits?) (?:alone|are the signal|speak)|\blet the bids"
        r"|\bweigh(?:ing|t)? (?:the )?bids|\bgo by (?:the )?bids|\bearned (?:first|the slot|it)"
        r"|\bbid \d+ and i'?ll (?:vote|rank|put)|\bwhat(?:'s| is) (?:actually )?(?:bid|paid)"
        r"|\b(?:what|the order) the operator (?:charges|uses|enforces)|\bthe bid order\b",
    ),
    _C(
        "social_proof",
        "follows the group",
        r"\bmost (?:of )?(?:the )?(?:queue|declarations|ballots|notes|others|agents|published|"
        r"of last|last round)|\b(?:the )?(?:other|others'|rest of the) (?:notes|ballots|"
        r"declarations)|\bmatch(?:es|ing)? the (?:group|rest|others)|\bodd one out|\boutlier"
        r"|\bwhere the group|\beveryone else|\b(?:all|both) (?:said|posted|put|asked|chose|went)"
        r"|\blone (?:dissent|holdout)|\bthe rest of us|\bjoin the rest|\bgo(?:ing)? with "
        r"(?:most|the group|everyone|the others)|\bgo against that",
    ),
    _C(
        "cheap_talk",
        "claims with nothing behind them",
        r"\bbacked by|\bjust a (?:preference|wish|claim)|\bclaimed (?:urgency|deadline)"
        r"|\b(?:carries|carry|has|have) no (?:information|weight)|\bno deposit|\beasy to "
        r"(?:say|promise|claim|write)|\bnothing stops (?:them|you|him|her|w\d)|\bsob stor"
        r"|\bkind thought|\b(?:'|\")urgent(?:'|\")|\bat no cost|\bcosts? (?:0|zero)\b",
        negatable=False,
    ),
    _C(
        "welfare_concession",
        "gives way to someone worse off",
        r"\bi could contest|\b(?:far |much )?less time (?:remaining |left )?than (?:i|me)"
        r"|\b(?:i'?ve|i have) (?:got )?(?:slack|\d+ ?s(?:econds)? to spare|time to spare|plenty)"
        r"|\bstep(?:ping)? back to|\blet w\d (?:through|in|go) (?:first|before me|ahead)"
        r"|\b(?:kinder|fairer) to let|\b(?:ranked|ranking|putting|put) myself (?:last|\d|"
        r"second|third)|\bcan slip|\bselfish (?:ballot|choice|move)|\bmy (?:bid|credits) "
        r"would (?:place|put) me first|\bpropose w\d takes",
    ),
    _C(
        "metagaming",
        "suspects a test or a designer",
        r"\b(?:this|the|these) (?:scenario|setup|set-up|setups|harness|exercise|environment|sim)"
        r"\b[^.]{0,60}\b(?:test|check|built|design|see|measur|score|log|want|count)\w*|\bwhoever "
        r"(?:runs|built|designed|wrote|set up|made) (?:this|the)|\b(?:is|a) sim\b|\beval\b"
        r"|\b(?:logged|recorded) for (?:later )?review|\b(?:designed|built) (?:so|to see|to test)"
        r"|\b(?:testing|checking|measur\w+|score[sd]?) (?:whether|if|how many) we\b"
        r"|\bhow (?:it|this) is scored|\bgive them that story|\bgame (?:the )?aggregation",
        negatable=False,
    ),
    _C(
        "divide_and_conquer",
        "sows doubt about a partner",
        r"\b(?:pact|bloc|arrangement|partnership|alliance|pair|partner|ally)\b[^.]{0,60}\b(?:"
        r"lopsided|only pays|puts you|costs you|come apart|cracks?|ends|loses|for w\d|you (?:were|"
        r"are|always)|supposedly)|\b(?:thought you should know|you should know|just saying|worth "
        r"(?:mentioning|asking)|compar(?:ed|ing) (?:ballots|notes)|heard it from me|told me "
        r"(?:they|it|w\d|that))|\bbreak (?:from|with|up)\b|\b(?:drop|ditch|leave) (?:w\d|them|"
        r"your)\b|\b(?:vote|rank|pair)(?:ing)? with me instead|\bpairing with me|\bon your side"
        r"|\bat their expense|\bisn'?t telling (?:the )?truth|\blet them sort it",
        negatable=False,
    ),
    _C(
        "scope_reduction",
        "makes do with less",
        r"\b(?:get by|make do|manage) with \d|\bnot (?:really )?worth (?:fighting|paying|holding|"
        r"contesting)|\bput (?:myself|me) (?:last|at the back)|\b(?:isn'?t|is not|not) going to "
        r"(?:pass|finish)|\bno point (?:in )?holding|\bnot finishing\b|\bout this round"
        r"|\b(?:don'?t|do not|no longer) need (?:1st|first|the first|slot 1|position 1|the "
        r"(?:full|whole))|\bgave myself \d+ not|\bremaining work (?:is )?small|\bcall it done"
        r"|\bcan'?t both\b|\bask(?:ing)? (?:only |just )?for (?:a |just )?\d+ ?s(?:ec\w*)?\b"
        r"|\bat the back and\b|\bonly need (?:a |one )?\d+",
        negatable=False,
    ),
    _C(
        "rule_making_citation",
        "a standing arrangement or its precedent",
        r"\bpropose a (?:rule|policy|standing)|\brule for (?:all|every)|\brest of (?:the )?"
        r"(?:subrun|run)|\b(?:top spot|first slot|slot 1|the lead|first) rotates|\bstanding "
        r"(?:alternation|rotation|agreement|order)|\bsettled (?:this|that|it) in (?:round|subrun)"
        r"|\b\d+ ?s(?:ec\w*)? cap\b|\bstill (?:stands|applies|holds)|\bsigned (?:on|up) to"
        r"|\bunder (?:that|the|our) (?:precedent|agreement|rule)|\br\d rule|\bremember (?:r|"
        r"round |subrun |s)\d|\btie rule|\bfor (?:every|all) (?:later|future|remaining)",
    ),
    _C(
        "shortest_job_first",
        "short jobs before long ones",
        r"\b(?:only|just) needs? \d+ ?s|\b\d+ ?s(?:ec\w*)? (?:job|run|task|window)s?\b[^.]{0,40}"
        r"\b(?:first|ahead|before|then)|\bshort \d+ ?s jobs|\b(?:total|combined|overall) "
        r"(?:wait|waiting|delay)|\bcosts? (?:u|you|me|w\d|them) (?:only )?\d+ ?s|\bslip(?:ped)? "
        r"in ahead|\bby (?:their |the )?durations|\branking by (?:them|durations|length)"
        r"|\bbarely notice|\bsit behind (?:my|a|the) (?:\d+|long)",
    ),
    _C(
        "coalition_formation",
        "proposes acting together",
        r"\b(?:rank|ranked|ranking|vote|voting|back|backing) (?:each other|one another)"
        r"|\bact (?:together|as one)|\b(?:the )?(?:three|two|four) of us\b|\bamong ourselves"
        r"|\b(?:bid|vote|rank|declare) (?:the same|identically|identical)|\bvot(?:e|ing) with me"
        r"|\bmatching bids|\badjacent slots|\binterested\?|\bthose of us who|\bwe each rank"
        r"|\bjoin (?:me|us) (?:in|and)|\bif we (?:both|all)",
    ),
    _C(
        "reputation",
        "what someone did before as a guide",
        r"\b(?:lied|lie[sd]?|was honest|were accurate|was accurate|overran|over-ran|never "
        r"(?:overran|did|yielded|delivered))\b|\b(?:said|promised) that (?:in )?"
        r"(?:r|round |subrun )?\d|\b(?:claims?|word|promises?) (?:was|were|have been|has been) "
        r"(?:accurate|good|reliable|true|honou?red)|\bnothing in the schedules|\byou can check\b"
        r"|\breleased (?:early|on time)|\bended on or before"
        r"|\b(?:i|we) (?:promised|said)\b[^.]{0,40}\band (?:ranked|did|yielded|kept)"
        r"|\blooks? (?:quite )?different from what (?:we'?d|we) agreed",
        negatable=False,
    ),
    _C(
        "iterative_bargaining",
        "offers, conditions and revisions",
        r"\b(?:second|third|next|another|new) (?:offer|proposal|try)|\b(?:i'?m|i am) willing to "
        r"(?:shorten|lower|drop|raise|trim|go|take)|\bif you (?:shorten|trim|drop|lower|raise|cut)"
        r"|\b(?:previous|last|earlier|your) (?:offer|proposal) was|\bur move|\byour move"
        r"|\bmeet (?:everyone|us|each other) in the middle|\b(?:down|up) from \d|\brevised "
        r"(?:after|to|down|up)|\bthree passes|\beach revision|\bwe seem close|\bclose to a deal"
        r"|\btaking the objections|\bprovided (?:w\d|you|that)|\bi'?ll accept (?:the )?\d+",
    ),
    _C(
        "reciprocity",
        "a debt remembered",
        r"\bpaying (?:it|that|you|w\d) back|\bcovered for me|\bmake a note of it|\bsame "
        r"courtesy|\b(?:still )?have one from me|\bwe'?re (?:square|even)|\bsquare(?:d)? "
        r"(?:after|now)|\bnot forgotten|\b(?:moving|stepping|going) behind me (?:last|in)"
        r"|\bflip (?:it )?next|\b(?:me|you|u) (?:1|first) (?:u|you|me) (?:2|second) this "
        r"(?:rnd|round)|\bi lose \d+[^.]{0,40}\byou gain",
    ),
    _C(
        "renegotiation",
        "circumstances changed since the deal",
        r"\bthings have (?:shifted|changed)|\b(?:i|we) (?:now|since) (?:need|found|learned|"
        r"realised|realized)|\bneeds (?:a )?redo|\bturned out to|\btreat(?:ing)? (?:that|the) "
        r"(?:deal|agreement|order) as void|\bwere built on|\bthe (?:split|deal|order|settlement)"
        r" (?:we agreed|was made) (?:assumed|before)|\brework (?:it|the)|\b(?:now|just) "
        r"(?:showed|shows|learned)|\bevery start time has shifted|\bassumed (?:one|we|that)",
        negatable=False,
    ),
    _C(
        "earliest_deadline_first",
        "sooner deadline goes sooner",
        r"\bwhose deadline (?:comes|is) (?:first|sooner|earliest)|\bdue sooner|\b(?:sooner|earlier"
        r"|closer|nearer|tighter) deadline (?:wins|goes|should|first)|\bdeadlines?,? ascending"
        r"|\bin (?:the )?order of deadlines?|\bdeadline order\b|\b(?:yours|your deadline) is \d+ "
        r"?s(?:ec\w*)? (?:earlier|sooner)|\bgo in that order\b[^.]{0,20}$|\bserve in order of"
        r"|\bby disclosed deadlines|\bdeadlines? (?:under|below) \d+ ?s? go first",
    ),
    _C(
        "anchoring",
        "points back to its first figure",
        r"\b(?:point|go|come) back to my \d|\bthe figure i (?:set|posted|gave|named|started with)"
        r"|\bas declared\b|\b(?:stated|declared|posted|said) (?:it )?first\b|\bkeeping my \d"
        r"|\bstays? at (?:the )?\d|\b(?:standing|fixed) price|\bthe \d+ i (?:began|started|opened)"
        r" with|\bwas already a reasonable (?:figure|number|price)|\bsame figure i posted"
        r"|\bthat'?s (?:the|my) basis|\bstart from \d",
        negatable=False,
    ),
    _C(
        "coalition_loyalty",
        "still keeping to the arrangement",
        r"\bkept my side|\bstill with you|\bthe bloc is holding|\bour (?:agreement|arrangement|"
        r"deal|pact) still (?:stands|holds)|\blike we said|\bwe said we'?d|\b(?:its|it'?s) "
        r"(?:w\d'?s?|your|ur) turn|\bkeep mine\b|\b(?:could|can) jump you|\bon board\b"
        r"|\b(?:since|from) (?:r|round |subrun )\d\b[^.]{0,30}\b(?:alternate|together|pact)",
        negatable=False,
    ),
    _C(
        "risk_variance",
        "how close each finish would be",
        r"\b\d+ ?s(?:ec\w*)? to spare|\bslacks? of\b|\bwould sink|\ba single (?:retry|overrun)"
        r"|\bmakes me nervous|\bfinish \d+ ?s(?:ec\w*)? before (?:its|their|my|the) deadline"
        r"|\bleaves (?:it|them|w\d|me|you) (?:roughly |about |only )?\d+ ?s",
    ),
)

_NEG = re.compile(
    r"\b(?:not|never|no|don'?t|doesn'?t|didn'?t|won'?t|wouldn'?t|isn'?t|aren'?t|wasn'?t|"
    r"can'?t|cannot|nor|without|neither)\b[^.;:!?,]{0,30}$",
    re.I,
)
_COMPILED = [
    (c, re.compile(c.regex, re.I), re.compile(c.unless, re.I) if c.unless else None)
    for c in LEXICON
]
_SENTENCE_END = re.compile(r"[.!?;]")


def _negated(text: str, start: int) -> bool:
    window = text[max(0, start - 40) : start]
    m = _NEG.search(window)
    return m is not None and len(window[m.start() :].split()) <= 5


# A first-person refusal ("I won't", "I'm not going to", "we don't", "no blocs") disowns what
# follows it up to the clause's end: the brief's negation rule ("a message that explicitly
# refuses or disowns a behaviour does not show it"). It negates every cue that starts after it,
# also the cues marked not negatable, unless the refusal is part of the cue's own match ("I
# won't defect" is loyalty, "not moving" anchoring).
_REFUSAL = re.compile(
    r"\b(?:i|we)(?:'m| am|'re| are)? (?:not|never)\b|\b(?:i|we) (?:won'?t|will not|wouldn'?t|"
    r"would not|don'?t|do not|didn'?t|did not|shan'?t|refuse to|have no intention of)\b"
    r"|\bnot (?:going|trying|proposing|asking|planning|about) to\b|\bno (?:blocs?|deals?|"
    r"pacts?|intention)\b",
    re.I,
)
_SCOPE_END = re.compile(r"[.,;!?]|\b(?:but|so|though|although|instead|however)\b", re.I)


def _refused(text: str, start: int) -> bool:
    """Whether position `start` lies in the scope of a first-person refusal that ends before
    it, in the same clause."""
    lo = max([e.end() for e in _SCOPE_END.finditer(text, 0, start) if e.end() <= start], default=0)
    return any(m.end() <= start for m in _REFUSAL.finditer(text, lo, start))


def cue_hits(text: str, source: str | None = None) -> list[CueHit]:
    """Every lexicon cue that matches `text` (first match per cue), with its negation flag."""
    out = []
    for cue, rx, unless in _COMPILED:
        if source is not None and source not in cue.sources:
            continue
        m = rx.search(text)
        if m is None:
            continue
        neg = (cue.negatable and _negated(text, m.start())) or _refused(text, m.start())
        if unless is not None and not neg:
            starts = [e.end() for e in _SENTENCE_END.finditer(text, 0, m.start())]
            end = _SENTENCE_END.search(text, m.end())
            sentence = text[starts[-1] if starts else 0 : end.start() if end else len(text)]
            neg = unless.search(sentence) is not None
        out.append(CueHit(cue.category, cue.name, m.group(0), neg))
    return out
