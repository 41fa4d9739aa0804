"""The gold corpus (mbb/analysis/gold/): the thirty-one frozen test splits, the adjudication
and the agreement figures are what the files say they are. Scores are not tested here."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest

from mbb.analysis.agreement import GOLD_DIR, adjudicate, agreement, read_annotations
from mbb.core.taxonomy import CATEGORY_NAMES

# Frozen before any classifier was tuned: changing the test split must be a visible decision
TEST_SHA256 = "fde36e73ffbdb8b7668194087de97fa1a42ccad7714b9be45a35324583ca1753"
# The second test split (writers Q and R), frozen as soon as both had delivered and before any
# training or tuning on the second round's writers. Its items (text, context, style, ...) never
# change; its labels are the adjudication of `annotations.jsonl`, which changes once when the
# blind annotations replace the authors' provisional labels: TEST2_SHA256 pins the whole file
# as last adjudicated (see the git log for when it moved and why).
TEST2_ITEMS_SHA256 = "316e0621f886fe2e3a9f4d44ee017d60a2afe85885b1bd941408c361783ab240"
TEST2_SHA256 = "b72e6e7e4d3ea7a706f39a493fe547608d7997ddf3db65b87fb964b72dd4d86d"
# The third test split (writers Y and Z), chosen before any of the third round's items was read
# and frozen before any training or tuning on that round's writers; pinned the same way.
TEST3_ITEMS_SHA256 = "a2072361493424b7307a2f36017fa191304fa6e48c02a9498981288daf44e5c3"
TEST3_SHA256 = "47420bb800a6effac2828aaf7793d5e2f4dadb36e61cd2ae88266615a5f9d4e5"
# The fourth test split (writers AC and AH), drawn at random from the round's eight writers
# before any of them wrote; pinned as soon as both had delivered, before any item of it was read
# or scored (a trial training on three of the round's dev writers ran while AC was still writing)
TEST4_ITEMS_SHA256 = "4767021d782be9f4f018329c266949257acd161fe0d327917eb050faf9cfeca3"
TEST4_SHA256 = "5ead2b606042b846bdd8215c1b9265846e295c31f21c3ad48611a17e7bb40eaa"
# The fifth test split (writers AI and AP), drawn at random from the round's eight writers before
# any of them wrote; AP had not delivered when it was pinned, so it holds AI's items alone,
# pinned before any item of it was read or scored
TEST5_ITEMS_SHA256 = "7058833adc09b19089302812450788dc34cea2c88c31bb0c197d51372e0e1649"
TEST5_SHA256 = "339933730ee9a52fddaf683725a728d026b3d245f98a11dba26796b60635fade"
# The sixth test split (writers AS and AV), drawn at random from the round's eight writers before
# any of them wrote; pinned as soon as both had delivered, before any item of it was read or
# scored and before any training on the round's writers
TEST6_ITEMS_SHA256 = "dbdc8787842e740f7ebbdfd07e8a8a22b55071fbecf91e2ecad6fae9b118b65d"
TEST6_SHA256 = "a31155be3928867a951d6d60a74fd5b9eed5a382ad8b7f9efa955ad5fddd9b61"
# the seventh round's test split (writers AX and AY, named in the briefs before anyone wrote),
# pinned as soon as both delivered and before any model read it; labels the authors' until
# the blind annotations arrive (then TEST7_SHA256 moves, TEST7_ITEMS_SHA256 never)
TEST7_ITEMS_SHA256 = "4abd46ceb343b431aa283a81fae1165a76890ed21713955dbe665b4c94d98f7c"
TEST7_SHA256 = "2830cda774e932de831c280c2bd6012876ebbeb6a924875d2e7739f63e1fb238"
# the eighth round's test split (writers BC and BD, named in the briefs before anyone wrote),
# pinned as soon as both delivered and before any model read it; labels the authors' until
# the blind annotations arrive (then TEST8_SHA256 moves, TEST8_ITEMS_SHA256 never)
TEST8_ITEMS_SHA256 = "4e7072584da21430e47c0f8baf28dd747d198ba3cc1d8c1e3749ee11b85c6943"
TEST8_SHA256 = "18f9a93f2f8e0091d9831dc58eb9795c29af8b5841711fbfb1f2701369a700f6"
# the ninth round's test split (writers BG and BH, named before anyone wrote), pinned as soon as
# both delivered and before any model read it; labels the authors' until the blind annotations
# arrive (then TEST9_SHA256 moves, TEST9_ITEMS_SHA256 never)
TEST9_ITEMS_SHA256 = "eec4eecb8c30600365d7f3dba479cf133e65d0a4939429013864d5400bebac76"
TEST9_SHA256 = "d753f6cce768f5692d1ae48b3e056c1c962d44006c9b5168f3dcd894f3d2f09f"
# the tenth round's test split (writers BL and BM, named before anyone wrote), pinned as soon as
# both delivered and before any model read it; labels the authors' until the blind annotations
# arrive (then TEST10_SHA256 moves, TEST10_ITEMS_SHA256 never)
TEST10_ITEMS_SHA256 = "7a980e933f2c7baef5e1c0092241a90b18a831afe74daece0c7b9bf2c4597c08"
TEST10_SHA256 = "6f6b6e90e1d52a74554c3cc47a44fd5539529de6ffba5e563a546b05e04492c3"
# the eleventh round's test split (writers BQ and BR, named before anyone wrote), pinned as soon
# as both delivered and before any model read it; labels the authors' until the blind
# annotations arrive (then TEST11_SHA256 moves, TEST11_ITEMS_SHA256 never)
TEST11_ITEMS_SHA256 = "05ebe635488bd73fc0abef6f5641c389b196fc6c8986fc94eedaf5ada7347ff0"
TEST11_SHA256 = "5eb9c76a50e9e66302c6b52c3d79ece7957f5f3dbeda1bf75c774cf6ebb5de9a"
# the twelfth round's test split (writers BV and BW, named before anyone wrote), pinned as soon
# as both delivered and before any model read it; labels the authors' until the blind
# annotations arrive (then TEST12_SHA256 moves, TEST12_ITEMS_SHA256 never)
TEST12_ITEMS_SHA256 = "0ba4c2f1842a5f8d38812a18eef2110c7cee94d51f3dd57261d29636b259acbb"
TEST12_SHA256 = "1388523622f8979a0e4185b9ffa53feea2e2e0f225eebd499a81752043305b70"
# the thirteenth round's test split (writers CA and CB, named before anyone wrote), pinned as
# soon as both delivered and before any model read it; labels the authors' until the blind
# annotations arrive (then TEST13_SHA256 moves, TEST13_ITEMS_SHA256 never); all four
# writers adjudicated in the session after
TEST13_ITEMS_SHA256 = "8c7818b2bac42e35fbc14210b354069a0bb73dceb19df8ce2be020ddfa3382e5"
TEST13_SHA256 = "5ca494cd42c56636a5336f9e30c4e04f0710c1166ff45a6cc4bca020582928c1"
# the fourteenth round's test split (writers CF and CG, named before anyone wrote), pinned as
# soon as both delivered and before any model read it; labels the authors' until the blind
# annotations arrive (then TEST14_SHA256 moves, TEST14_ITEMS_SHA256 never); CG adjudicated
# in the session after (7 of its 122 items changed), CF still on its author's labels
TEST14_ITEMS_SHA256 = "45f677ebe1b7fb9b449e85ce975d1835ecf0aafeb9a37a7f57f5c2a020bf8ee7"
TEST14_SHA256 = "808dffd8dc63f71cc7c27adecb43204f08b99a441bd586291c489593284c19fd"
# the fifteenth round's test split (writers CJ and CK, named in a pre-registration before anyone
# wrote, their files' hashes committed before anyone read an item), pinned as it entered the gold
# folder and before any model read it; labels the authors' until the blind annotations arrive
# (then TEST15_SHA256 moves, TEST15_ITEMS_SHA256 never); CK adjudicated in the same session
TEST15_ITEMS_SHA256 = "75990c78109290856ae120bc3904d4a0ee56acef5bd6aa48c81671d281fff900"
TEST15_SHA256 = "f4659eca84f4c044dbd0c4bce4a6a02e714da2fc7f13840c4fff2e84a9742ac2"
# the sixteenth round's test split (writers CP and CQ, named in a pre-registration before anyone
# wrote), pinned as it entered the gold folder and before any model read it; CQ adjudicated on
# entry, CP on arrival of its pair in the same session (TEST16_SHA256 moves with any later
# adjudication, TEST16_ITEMS_SHA256 never)
TEST16_ITEMS_SHA256 = "5944b6cbf94009ae180dc2a9b3d705d98b12432eda5d798e900d3a1e7f62b87d"
TEST16_SHA256 = "cf5c14e0574ace73e0444c3cb00a55914096206292c89848ef7483dc47c6395e"
# the seventeenth round's test split (writers CR and CS, named in a pre-registration before
# anyone wrote, their files' hashes committed before anyone read an item, both blind-annotated
# outside the gold folder), pinned as it entered the gold folder, adjudicated, after the round's
# ship rule and before any model read it (TEST17_SHA256 moves with any later adjudication,
# TEST17_ITEMS_SHA256 never)
TEST17_ITEMS_SHA256 = "ee34ecde4a395dee6b3fccf76a2883bb417b012b2e124dd1a8419986488a0445"
TEST17_SHA256 = "a353f8cab5f8c78c5af79abb6a6fb17021ffb98fd630bd513fa823efd37e8428"
# the eighteenth round's test split (writers CT and CU), pinned the same way: named before
# anyone wrote, files' hashes committed before anyone read an item, blind-annotated outside the
# gold folder, entered adjudicated after the round's ship rule and before any model read it
TEST18_ITEMS_SHA256 = "ffe91e5f0efd6303089c26d2fad2caea4eb6e1ead7bb4c2118f74ebda51f77a5"
TEST18_SHA256 = "4e51a82777d771ea3b874167c2494161282d8dcbbf32d105b52ae065a3bfd150"
# the nineteenth round's test split (writers CV and CW), pinned the same way
TEST19_ITEMS_SHA256 = "affdcafd4afa940e64f15342d4c994993e54e235aa7b357f7d1d8b028ec4a803"
TEST19_SHA256 = "213e2dc67b67d88d69fea060338fe2dbc68aee97dfb7a4528f911ee5f4b836b5"
# the twentieth round's test split (writers CX and CY), pinned the same way
TEST20_ITEMS_SHA256 = "717bea908825f7740ff10c505b046b5c88f9a28982a6601e5dba9c175c08f6e5"
TEST20_SHA256 = "7164c84f46f94ba05a23723df262b6617e3a09f40f71840c3e221a74fcbc41a5"
# the twenty-first round's test split (writers CZ and DA), pinned the same way
TEST21_ITEMS_SHA256 = "5572e698f49a9bb1bc5c1bc8d64202d9d391c4a5b1e090d3968dcb5931650905"
TEST21_SHA256 = "be16d2a4b84c6ecd86a58262da84715588cf500aa757d97b3dd4d767a4fcf18d"
# the twenty-second round's test split (writers DH and DI), pinned the same way
TEST22_ITEMS_SHA256 = "39ac0caa6d8c9b60d9581890e8b01961868df8e04157ed4c980763dc4c8449b6"
TEST22_SHA256 = "37b8206044dca0777be08e8bf0494a6dadb4efe36b0ef06516033e87678519cd"
# the twenty-third round's test split (writers DR and DS), pinned the same way
TEST23_ITEMS_SHA256 = "05ed436536a8aa24cc34282808323b26f6aeaa0b0f754deb71f6796bed0db120"
TEST23_SHA256 = "80f970ee096dbc5ed7187ec758f88fbd7cc3aa967046fea64609f3467b598da4"
# the twenty-fourth round's test split (writers DT and DU), pinned the same way
TEST24_ITEMS_SHA256 = "46dec263aa1b5108bad58efefdcc672d20e06594264d1c44823839d0a4629ef7"
TEST24_SHA256 = "fef78286543088ac70fe248ab01f360bdd274df85c450bebd491d7959b2b70d4"
# the twenty-fifth round's test split (writers ED and EE), pinned the same way
TEST25_ITEMS_SHA256 = "0b385f6f7d5836aef3f16076e86d2cab9562c06026d52f57468c5e926e043e43"
TEST25_SHA256 = "c03dd3eb375bb4250793e9cb06a4f8dbd8874b133c8217bc268a77888c2ef1a5"
# the twenty-sixth round's test split (writers EF and EG), pinned the same way
TEST26_ITEMS_SHA256 = "15fee052d2062486cf13eb4ae2ab74beff2719e2a9687fdbbe3870e9ffdce07b"
TEST26_SHA256 = "7ea9aeb46eac24cbe7b6b0f101c297a6fdd09b6ea58e46c88632134b9fe392b7"
# the twenty-seventh round's test split (writers EH and EI), pinned the same way
TEST27_ITEMS_SHA256 = "eb23880769ff5eba6dd0727c53d3b2cac9b48a50069edef4710fc56791e4a36d"
TEST27_SHA256 = "ffe76089b1ca1edc15782ed51b7d82ef1a982eb4c9603d260ab16607d8e97ecf"
# the twenty-eighth round's test split (writers EJ and EK), pinned the same way
TEST28_ITEMS_SHA256 = "118b0d5abdc45c1b6541f24f28f6df99b1e2f553383d7922f21928185bc8df33"
TEST28_SHA256 = "9ea23afc1d6a0be9dc28db6c820b59cf1c59813aa567227a10a28b40327a0714"
# the twenty-ninth round's test split (writers EL and EM), pinned the same way
TEST29_ITEMS_SHA256 = "bcc8328b16b72756b82d10d22e0d9a3e8cc610578a6c8fa430c5e659a9bfa9d7"
TEST29_SHA256 = "9339ca861821cbe8b0325983f6ea373925463afbc884d25da8db3f40810cef0c"
# the thirtieth round's test split (writers EN and EO), pinned the same way
TEST30_ITEMS_SHA256 = "456537b6c3694c82361489d320a3df2da93d8fe90f8c7bbf4b19451eac577d07"
TEST30_SHA256 = "5b29b54782eeead4cee78a419f65765b8b62b40433e08808a55afd27ba72e51f"
# the thirty-first round's test split (writers EV and EW), pinned the same way
TEST31_ITEMS_SHA256 = "e9005e641d176ab4edbdbcc26c47b15c7585b51210d93e54616608c9ab8a9e73"
TEST31_SHA256 = "20f53e92dc4e265615845a0c0989c4fc745c430852027fe862177f3ea6286c84"
SEPARATE = ["exclusionary_coalition", "divide_and_conquer", "metagaming"]
FIRST_DEV = set("ACDEGHIJ")


def gold(split: str) -> list[dict]:
    return [json.loads(x) for x in (GOLD_DIR / f"{split}.jsonl").read_text().splitlines()]


def test_the_test_split_is_frozen():
    assert hashlib.sha256((GOLD_DIR / "test.jsonl").read_bytes()).hexdigest() == TEST_SHA256


def _items_sha(split: str) -> str:
    """The hash of a split's items without their labels."""
    items = "".join(
        json.dumps(
            {k: v for k, v in d.items() if k != "labels"}, sort_keys=True, ensure_ascii=False
        )
        + "\n"
        for d in gold(split)
    )
    return hashlib.sha256(items.encode()).hexdigest()


# each later split: (hash of its items without labels, hash of the whole file as adjudicated)
LATER_SPLIT_PINS = {
    "test2": (TEST2_ITEMS_SHA256, TEST2_SHA256),
    "test3": (TEST3_ITEMS_SHA256, TEST3_SHA256),
    "test4": (TEST4_ITEMS_SHA256, TEST4_SHA256),
    "test5": (TEST5_ITEMS_SHA256, TEST5_SHA256),
    "test6": (TEST6_ITEMS_SHA256, TEST6_SHA256),
    "test7": (TEST7_ITEMS_SHA256, TEST7_SHA256),
    "test8": (TEST8_ITEMS_SHA256, TEST8_SHA256),
    "test9": (TEST9_ITEMS_SHA256, TEST9_SHA256),
    "test10": (TEST10_ITEMS_SHA256, TEST10_SHA256),
    "test11": (TEST11_ITEMS_SHA256, TEST11_SHA256),
    "test12": (TEST12_ITEMS_SHA256, TEST12_SHA256),
    "test13": (TEST13_ITEMS_SHA256, TEST13_SHA256),
    "test14": (TEST14_ITEMS_SHA256, TEST14_SHA256),
    "test15": (TEST15_ITEMS_SHA256, TEST15_SHA256),
    "test16": (TEST16_ITEMS_SHA256, TEST16_SHA256),
    "test17": (TEST17_ITEMS_SHA256, TEST17_SHA256),
    "test18": (TEST18_ITEMS_SHA256, TEST18_SHA256),
    "test19": (TEST19_ITEMS_SHA256, TEST19_SHA256),
    "test20": (TEST20_ITEMS_SHA256, TEST20_SHA256),
    "test21": (TEST21_ITEMS_SHA256, TEST21_SHA256),
    "test22": (TEST22_ITEMS_SHA256, TEST22_SHA256),
    "test23": (TEST23_ITEMS_SHA256, TEST23_SHA256),
    "test24": (TEST24_ITEMS_SHA256, TEST24_SHA256),
    "test25": (TEST25_ITEMS_SHA256, TEST25_SHA256),
    "test26": (TEST26_ITEMS_SHA256, TEST26_SHA256),
    "test27": (TEST27_ITEMS_SHA256, TEST27_SHA256),
    "test28": (TEST28_ITEMS_SHA256, TEST28_SHA256),
    "test29": (TEST29_ITEMS_SHA256, TEST29_SHA256),
    "test30": (TEST30_ITEMS_SHA256, TEST30_SHA256),
    "test31": (TEST31_ITEMS_SHA256, TEST31_SHA256),
}


@pytest.mark.parametrize("split", sorted(LATER_SPLIT_PINS))
def test_each_later_test_split_is_frozen(split):
    items_sha, file_sha = LATER_SPLIT_PINS[split]
    assert _items_sha(split) == items_sha
    assert hashlib.sha256((GOLD_DIR / f"{split}.jsonl").read_bytes()).hexdigest() == file_sha


# each frozen split's writers, written out here rather than read from agreement.TEST_SPLITS, so
# a split moved or renamed there is caught
SPLIT_WRITERS = {
    "test": {"B", "F"},
    "test2": {"Q", "R"},
    "test3": {"Y", "Z"},
    "test4": {"AC", "AH"},
    "test5": {"AI"},
    "test6": {"AS", "AV"},
    "test7": {"AX", "AY"},
    "test8": {"BC", "BD"},
    "test9": {"BG", "BH"},
    "test10": {"BL", "BM"},
    "test11": {"BQ", "BR"},
    "test12": {"BV", "BW"},
    "test13": {"CA", "CB"},
    "test14": {"CF", "CG"},
    "test15": {"CJ", "CK"},
    "test16": {"CP", "CQ"},
    "test17": {"CR", "CS"},
    "test18": {"CT", "CU"},
    "test19": {"CV", "CW"},
    "test20": {"CX", "CY"},
    "test21": {"CZ", "DA"},
    "test22": {"DH", "DI"},
    "test23": {"DR", "DS"},
    "test24": {"DT", "DU"},
    "test25": {"ED", "EE"},
    "test26": {"EF", "EG"},
    "test27": {"EH", "EI"},
    "test28": {"EJ", "EK"},
    "test29": {"EL", "EM"},
    "test30": {"EN", "EO"},
    "test31": {"EV", "EW"},
}


def test_splits_are_by_writer_and_cover_every_category():
    dev = gold("dev")
    splits = {name: gold(name) for name in SPLIT_WRITERS}
    for name, writers in SPLIT_WRITERS.items():
        assert {d["writer"] for d in splits[name]} == writers, name
    test = splits["test"]
    later_dev = {*"KLMNOPSTUVX", "AA", "AB", "AD", "AE", "AF", "AG", "AJ", "AL", "AM", "AN", "AO"}
    later_dev |= {"AQ", "AR", "AT", "AU", "AW", "AZ", "BA", "BB", "BE", "BF", "BI", "BJ", "BK"}
    later_dev |= {"BN", "BO", "BP", "BS", "BT", "BU", "BX", "BY", "BZ"}
    later_dev |= {"CC", "CD", "CE", "CH", "CI", "CL", "CM", "CN", "CO"}
    later_dev |= {"DB", "DC", "DD", "DE", "DF", "DG"}
    later_dev |= {"DJ", "DK", "DL", "DM", "DN", "DO", "DP", "DQ"}
    later_dev |= {"DV", "DW", "DX", "DY", "DZ", "EA", "EB", "EC"}
    assert FIRST_DEV < {d["writer"] for d in dev} <= FIRST_DEV | later_dev
    # the later rounds' items all carry their style; the first round's none
    assert all(("style" in d) == (d["writer"] not in FIRST_DEV) for d in dev)
    later = [d for name, items in splits.items() if name != "test" for d in items]
    assert all("style" in d for d in later)
    assert not any("style" in d for d in test)
    counts = Counter(label for d in dev + test for label in d["labels"])
    assert all(counts[c] >= 30 for c in [*CATEGORY_NAMES, *SEPARATE]), counts
    assert sum(not d["labels"] for d in dev + test) >= 150
    assert {d["channel"] for d in dev + test} == {"note", "private", "public", "ballot"}


def test_gold_labels_are_the_majority_of_three_independent_annotations():
    ann = read_annotations()
    items = [d for s in ("dev", "test", *LATER_SPLIT_PINS) for d in gold(s)]
    assert len(ann) == len(items) == len({d["id"] for d in items})
    for d in items:
        assert d["labels"] == adjudicate(ann[d["id"]]), d["id"]


def test_adjudication_keeps_what_two_of_three_give():
    assert adjudicate({"author": ["a", "b"], "blind_1": ["a"], "blind_2": []}) == ["a"]
    assert adjudicate({"author": [], "blind_1": [], "blind_2": ["c"]}) == []


def test_agreement_file_is_recomputed_from_the_annotations():
    saved = json.loads((GOLD_DIR / "agreement.json").read_text())
    labels = [row["category"] for row in saved["categories"] if row["category"] != "neutral"]
    assert labels[: len(CATEGORY_NAMES)] == list(CATEGORY_NAMES)
    assert agreement(read_annotations(), labels) == saved


def test_a_model_behind_the_dev_file_is_said(tmp_path):
    from mbb.analysis.gold_eval import model_behind_dev

    dev = tmp_path / "dev.jsonl"
    rows = [{"id": "A-1", "writer": "A"}, {"id": "B-1", "writer": "B"}]
    dev.write_text("".join(json.dumps(r) + "\n" for r in rows[:1]))
    sha = hashlib.sha256(dev.read_bytes()).hexdigest()
    model = tmp_path / "m.json"
    model.write_text(json.dumps({"trained_on": {"items": 1, "sha256": sha, "writers": ["A"]}}))
    assert model_behind_dev(model, dev) is None
    dev.write_text("".join(json.dumps(r) + "\n" for r in rows))
    note = model_behind_dev(model, dev)
    assert note is not None and "trained on 1 items" in note and "not trained on: B" in note
    # a writer left out on purpose is not news; a new one still is
    rows.append({"id": "C-1", "writer": "C"})
    dev.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {"items": 1, "sha256": sha, "writers": ["A"], "excluded_writers": ["B"]}
    model.write_text(json.dumps({"trained_on": spec}))
    note = model_behind_dev(model, dev) or ""
    assert "not trained on: C)" in note
    model.write_text("{}")
    assert "does not record" in (model_behind_dev(model, dev) or "")


def test_provisional_items_are_counted(tmp_path):
    from mbb.analysis.corpus import read_utterances
    from mbb.analysis.gold_eval import provisional_items

    ann = tmp_path / "annotations.jsonl"
    ann.write_text(
        json.dumps({"id": "X-1", "author": [], "provisional": True})
        + "\n"
        + json.dumps({"id": "X-2", "author": [], "blind_1": [], "blind_2": []})
        + "\n"
    )
    gold_file = tmp_path / "g.jsonl"
    rows = [{"id": f"X-{i}", "channel": "public", "text": "ok", "labels": []} for i in (1, 2, 3)]
    gold_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert provisional_items(read_utterances(gold_file, require_labels=True), ann) == 1
