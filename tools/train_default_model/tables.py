"""Fixed tables the synthetic data draws from: words, first names, countries and capitals."""

# Common English words (lower case, ASCII). Used for repeat/copy spans, spelling, reversing and counting.
WORDS = """
able acid actor after again agent alarm album alert alive alley amber angle angry ankle apple april arena
arrow aspen atlas audio autumn avenue awake badge baker bamboo banana banner barrel basket beach beard
beast begin bench berry bicycle birch bird black blade blanket blend blind block bloom board boat bonus
border bottle bounce brain brave bread breeze brick bridge bright broom brush bubble bucket budget
buffalo bundle butter button cabin cable cactus camel camera canal candle canoe canvas carbon carpet
carrot castle cattle cedar cellar cement cereal chain chair chalk charm cheese cherry chess chicken
chimney circle citrus clay clever cliff clock cloud clover coast cobalt coconut coffee collar comet
copper coral corner cotton couch country cousin cradle crane crater crayon cream cricket crown crystal
cupboard curtain cushion daisy dance danger dawn debate decade desert design desk diamond diary dinner
dolphin donkey dragon drawer dream drum eagle earth echo eclipse elbow elephant ember empire energy
engine escape evening fabric falcon family farmer feather fence ferry fiber field finger flame flavor
flower flute forest fossil fountain fox frame friend frost fruit galaxy garage garden garlic gate
gentle giant ginger glacier glass globe glove golden gospel grape gravel green guitar habit hammer
harbor harvest hawk hazel helmet hero hollow honey horizon horse hotel hunter island ivory jacket jaguar
jelly jewel jungle kettle kitchen kitten knight ladder lagoon lake lantern laptop lava lemon letter
lily limit linen lion lizard lobster locket magnet mango maple marble market meadow melon mercury
metal meteor minute mirror mitten monkey moon morning mosaic motor mountain muffin museum music
napkin nectar needle nest noble noodle north novel number oak ocean olive onion orange orbit orchard
otter oven owl oxygen paddle palace panda paper parade parrot pasta peach peanut pearl pebble pencil
pepper piano pickle pigeon pillow pilot pine planet plaster plum pocket poem polar pond potato powder
prairie prism puzzle pyramid quartz quiet rabbit radar radio rainbow raven ribbon river robin rocket
rose ruby saddle salad salmon sand satin scarf school season shadow shell shelter signal silver
singer sketch sky slate snow soap socket sofa solar spider spoon spring square stable star statue
stone storm stream sugar summer sunset swan table tablet tailor teapot temple thunder tiger timber
toast tomato tower tractor travel tree tulip tunnel turtle umbrella valley velvet violin volcano
wagon walnut wander window winter wizard wolf wonder yellow yogurt zebra zenith
""".split()

NAMES = """
Alice Amara Ana Ben Bruno Carla Chen Clara Daniel David Elena Emma Felix Fatima Grace Hana Hugo Ines
Ivan Jack James Julia Kai Karim Laura Leo Lina Lucas Maria Mateo Maya Mia Nadia Nina Noah Olga Omar
Oscar Paula Peter Priya Rosa Sam Sara Sofia Tom Uma Victor Wei Yara Yusuf Zoe Anna Marco Lena Ravi
""".split()

# (country as written after "the capital of", capital)
COUNTRIES = [
    ("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"),
    ("Portugal", "Lisbon"), ("the United Kingdom", "London"), ("Ireland", "Dublin"),
    ("the Netherlands", "Amsterdam"), ("Belgium", "Brussels"), ("Switzerland", "Bern"),
    ("Austria", "Vienna"), ("Poland", "Warsaw"), ("the Czech Republic", "Prague"),
    ("Hungary", "Budapest"), ("Greece", "Athens"), ("Sweden", "Stockholm"), ("Norway", "Oslo"),
    ("Denmark", "Copenhagen"), ("Finland", "Helsinki"), ("Iceland", "Reykjavik"),
    ("Romania", "Bucharest"), ("Bulgaria", "Sofia"), ("Croatia", "Zagreb"), ("Serbia", "Belgrade"),
    ("Turkey", "Ankara"), ("Egypt", "Cairo"), ("Kenya", "Nairobi"), ("Nigeria", "Abuja"),
    ("Morocco", "Rabat"), ("Ethiopia", "Addis Ababa"), ("Ghana", "Accra"), ("Japan", "Tokyo"),
    ("China", "Beijing"), ("South Korea", "Seoul"), ("India", "New Delhi"), ("Pakistan", "Islamabad"),
    ("Bangladesh", "Dhaka"), ("Thailand", "Bangkok"), ("Vietnam", "Hanoi"), ("Indonesia", "Jakarta"),
    ("the Philippines", "Manila"), ("Australia", "Canberra"), ("New Zealand", "Wellington"),
    ("Canada", "Ottawa"), ("the United States", "Washington, D.C."), ("Mexico", "Mexico City"),
    ("Brazil", "Brasília"), ("Argentina", "Buenos Aires"), ("Chile", "Santiago"), ("Peru", "Lima"),
    ("Cuba", "Havana"), ("Saudi Arabia", "Riyadh"),
]

# Short function words mixed into random spans so they read more like text.
FILLERS = "a the and of to in on with for at by from is was are under over near".split()

# Syllables for made-up words and names: spelling, reversing and letter counts are taught on these too,
# so the model learns the letters of short tokens rather than memorising whole words.
ONSETS = "b c d f g h j k l m n p r s t v w z br ch cl dr fl gr pl sh st tr".split()
VOWELS = "a e i o u ai ea io ou".split()
CODAS = ["", "", "", "n", "r", "l", "s", "t", "m", "nd", "st"]
